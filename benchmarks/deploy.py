"""Provisioning figures: rendering and validating manifests for every EKS architecture the example workloads
produce, an apply + teardown round trip of EksProvisioner against the in-memory Kubernetes API on loopback, and
the time a local twin takes to answer /health. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/deploy.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sizing.deploy import validate as checks
from sizing.deploy.architecture import DeployTarget
from sizing.deploy.eks import EksProvisioner
from sizing.deploy.kube import KubeClient
from sizing.deploy.manifests import render
from sizing.deploy.rendering import RenderOptions
from sizing_local.twins import LocalTwinProvisioner

ROOT = Path(__file__).resolve().parents[1]
# The in-memory Kubernetes API is a test double: it lives with the tests, not in the package.
sys.path.insert(0, str(ROOT / "tests"))
from fakes.kube import FakeKube, parse_query  # noqa: E402

#: Quoted when the planner is missing (same list as tests/unit/test_deploy_validate.py).
FALLBACK = [
    ("eks:g5.12xlarge:tp1:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B"),
    ("eks:p5.48xlarge:tp8:bf16:vllm:on-demand", "meta-llama/Llama-3.1-405B"),
    ("eks:inf2.48xlarge:tp24:bf16:neuron:on-demand", "meta-llama/Llama-3.1-70B"),
    ("eks:trn2.48xlarge:tp64:fp8:neuron:on-demand", "meta-llama/Llama-3.1-70B"),
]


def architectures() -> list[dict[str, Any]]:
    try:
        from sizing.plan import estimate
        from sizing.workload.parse import load_spec
    except ImportError:
        return [DeployTarget.from_id(i, m).model_dump() for i, m in FALLBACK]
    out: list[dict[str, Any]] = []
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        out += [
            a for a in estimate(load_spec(path)).document()["architectures"] if a.get("deployment") == "eks"
        ]
    return out


def ms(fn: Callable[..., Any], *args: Any) -> float:
    t = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - t) * 1000


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def serve_fake(fake: FakeKube) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def _do(self) -> None:
            parts = urlsplit(self.path)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, payload = fake.handle(
                self.command, parts.path, parse_query(parts.query), dict(self.headers), body
            )
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PATCH = do_DELETE = _do

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    archs = architectures()
    opts = RenderOptions(checkpoints={"int8": "org/pre-quantized-w8a8"})
    # The catalog is already loaded by the planner above; "first" is the first render of this process.
    cold_render = ms(lambda: render(archs[0], "bench", archs[0]["id"], opts))
    cold_validate = ms(lambda: checks.problems(render(archs[0], "bench", archs[0]["id"], opts)))
    render_ms, validate_ms = [], []
    for _ in range(args.repeat):
        for a in archs:
            t = time.perf_counter()
            objs = render(a, "bench", a["id"], opts)
            render_ms.append((time.perf_counter() - t) * 1000)
            validate_ms.append(ms(checks.problems, objs))
    print(
        f"architectures: {len(archs)} EKS candidates from {len(list((ROOT / 'examples').glob('*.yaml')))} examples"
    )
    print(
        f"render:   first {cold_render:.1f} ms; then p50 {statistics.median(render_ms):.2f} ms, "
        f"p95 {pct(render_ms, 0.95):.2f} ms per architecture (6 objects)"
    )
    print(
        f"validate: first {cold_validate:.0f} ms (schema compile); then p50 {statistics.median(validate_ms):.1f} ms, "
        f"p95 {pct(validate_ms, 0.95):.1f} ms per architecture (2 CRDs + 4 core objects x 4 Kubernetes versions)"
    )

    fake = FakeKube().with_hf_secret()
    server = serve_fake(fake)
    client = KubeClient(f"http://127.0.0.1:{server.server_address[1]}")
    prov = EksProvisioner(client, poll_s=0)
    arch = DeployTarget.from_id("eks:g6e.12xlarge:tp4:bf16:vllm:on-demand", "meta-llama/Llama-3.1-8B")
    apply_ms, reapply_ms, teardown_ms, requests = [], [], [], []
    for i in range(args.repeat):
        before = len(fake.requests)
        apply_ms.append(ms(prov.apply, arch, f"bench-{i}", arch.id))
        reapply_ms.append(ms(prov.apply, arch, f"bench-{i}", arch.id))
        teardown_ms.append(ms(prov.teardown, f"bench-{i}"))
        requests.append(len(fake.requests) - before)
    server.shutdown()
    print(
        f"EKS on the fake API: apply p50 {statistics.median(apply_ms):.0f} ms, re-apply "
        f"{statistics.median(reapply_ms):.0f} ms, teardown {statistics.median(teardown_ms):.0f} ms; "
        f"{statistics.median(requests):.0f} API requests per apply + re-apply + teardown"
    )

    starts = []
    with LocalTwinProvisioner() as twins:
        for i in range(max(1, args.repeat // 2)):
            starts.append(ms(twins.apply, arch, f"bench-twin-{i}", arch.id) / 1000)
            twins.teardown(f"bench-twin-{i}")
    print(
        f"local twin: start to /health p50 {statistics.median(starts):.2f} s, max {max(starts):.2f} s "
        f"({len(starts)} starts)"
    )


if __name__ == "__main__":
    main()
