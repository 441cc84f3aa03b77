"""`sizing manifests --architecture ID|FILE`: the Karpenter and Kubernetes YAML that runs one architecture
(`sizing manifests --rbac [GROUP]`: the RBAC the provisioning identity needs).

FILE is one architecture (JSON) or a whole estimate result (then `--id` picks one; default: the best-ranked EKS
architecture). An ID (`eks:p5.48xlarge:tp4:fp8:vllm:on-demand`) needs `--model` or `--workload` for the model, and
takes the engine's default serving configuration (`--max-model-len` states its context).
Refuses what `sizing predict` refuses (exit 2, naming the field) before writing anything. Writes one YAML file
per object kind into `--out`, or prints one YAML stream. See docs/manifests.md."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sizing.base.errors import InvalidInput, Problem


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("manifests", help="write the Karpenter + Kubernetes manifests for an architecture")
    p.add_argument("--architecture", metavar="ID|FILE", help="architecture id or JSON file")
    p.add_argument("--id", help="which architecture of an estimate result (default: best-ranked EKS one)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--model", help="model (catalog id) when --architecture is an id")
    src.add_argument("--workload", help="workload spec whose model to use when --architecture is an id")
    p.add_argument(
        "--run-id", default="manual", help="run id the objects are labelled with (default: manual)"
    )
    p.add_argument("--candidate-id", help="candidate id label (default: the architecture id)")
    p.add_argument("--replicas", type=int, help="fixed replicas (default: the architecture's minimum)")
    p.add_argument("--no-autoscale", action="store_true", help="leave out the HorizontalPodAutoscaler")
    p.add_argument("--namespace", default="llm-sizing", help="namespace of the serving objects (rendered)")
    p.add_argument(
        "--adapter-namespace",
        default="monitoring",
        help="namespace where prometheus-adapter runs (must exist; the adapter rule's ConfigMap goes there)",
    )
    p.add_argument("--cluster-name", default="llm-sizing", help="karpenter.sh/discovery tag value")
    p.add_argument("--node-role", default="KarpenterNodeRole-llm-sizing", help="IAM role of the nodes")
    p.add_argument("--ami-family", choices=["al2023", "bottlerocket"], default="al2023")
    p.add_argument("--ami-version", help="AMI release of the alias (default: the pinned one)")
    p.add_argument(
        "--purpose",
        choices=["serve", "run"],
        default="serve",
        help="serve: a production deployment (default); run: a sizing run's short-lived nodes",
    )
    p.add_argument(
        "--capacity-reservation",
        metavar="ID",
        help="EC2 capacity reservation or Capacity Block (cr-...) the nodes launch into first",
    )
    p.add_argument("--zones", help="comma-separated availability zones the nodes may use (default: all)")
    p.add_argument(
        "--timezone",
        metavar="IANA",
        help="time zone of the business hours (08:00-18:00, Monday to Friday) in which serving nodes are not"
        " disrupted; converted to UTC for Karpenter (default: the --workload's traffic.timezone, else UTC)",
    )
    p.add_argument(
        "--max-model-len",
        type=int,
        metavar="N",
        help="context of a bare id's serving configuration (default 8192, capped by the model's)",
    )
    p.add_argument(
        "--validate",
        action="store_true",
        help="validate against the CRDs and Kubernetes 1.31-1.34 and print what was checked",
    )
    p.add_argument(
        "--rbac",
        metavar="GROUP",
        nargs="?",
        const="llm-sizing",
        help="instead: the RBAC the provisioning identity (Kubernetes group, default llm-sizing) needs",
    )
    p.add_argument("--out", help="directory for one YAML file per kind (default: print to stdout)")
    p.set_defaults(func=run)


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None


def load_architecture(args: argparse.Namespace) -> Any:
    from sizing.deploy.architecture import DeployTarget, pick_architecture

    path = Path(args.architecture)
    if path.is_file():
        if args.max_model_len is not None:
            raise InvalidInput(
                "--max-model-len applies to a bare architecture id; a file states its serving.max_model_len",
                [Problem("max_model_len", "only with an architecture id")],
            )
        raw = _load_json(path)
        if isinstance(raw, dict) and "architectures" in raw:
            return DeployTarget.from_answer(
                pick_architecture(raw, args.id, deployment=None if args.id else "eks")
            )
        return DeployTarget.from_dict(raw)
    if args.architecture.count(":") != 5:
        raise InvalidInput(f"--architecture: '{args.architecture}' is neither a file nor an architecture id")
    model = args.model
    if args.workload:
        from sizing.workload.parse import load_spec

        model = load_spec(args.workload).model
    if not model:
        raise InvalidInput("--model (or --workload) is required when --architecture is an id")
    arch = DeployTarget.from_id(args.architecture, model)
    if args.max_model_len is None:
        return arch
    return arch.model_copy(update={"serving": _serving_with_context(arch, args.max_model_len)})


def _serving_with_context(arch: Any, max_model_len: int) -> Any:
    """The engine's default `ServingConfig` for a bare id, with the stated context."""
    from sizing.catalog import load_catalog
    from sizing.plan.serving import serving_for

    cat = load_catalog()
    spec = cat.model(arch.model)
    if max_model_len < 1 or max_model_len > spec.max_position_embeddings:
        raise InvalidInput(
            f"--max-model-len {max_model_len:,} is outside 1..{spec.max_position_embeddings:,} (the context of"
            f" {spec.id})",
            [Problem("max_model_len", f"must be 1..{spec.max_position_embeddings}")],
        )
    return serving_for(
        cat,
        arch.model,
        arch.instance_type or "",
        arch.tensor_parallel,
        arch.quantization,
        arch.engine,
        max_model_len=max_model_len,
    )


def _business_hours(args: argparse.Namespace) -> dict[str, str]:
    """The serving budget's window from --timezone (or the workload's), said on stderr with its UTC hours."""
    from sizing.deploy.nodes import business_hours_window
    from sizing.workload.parse import load_spec

    tz = args.timezone
    if tz is None and getattr(args, "workload", None):
        tz = load_spec(args.workload).traffic.timezone
    if tz is None:
        return {}
    try:
        window = business_hours_window(tz)
    except (KeyError, ValueError):
        raise InvalidInput(
            f"--timezone: unknown time zone '{tz}' (use an IANA name such as America/New_York)",
            [Problem("timezone", tz)],
        ) from None
    if args.purpose == "serve":
        print(f"business hours: {window.note}", file=sys.stderr)
    return {"business_hours_schedule": window.schedule, "business_hours_duration": window.duration}


def run(args: argparse.Namespace) -> int:
    from sizing.deploy import validate as checks
    from sizing.deploy.manifests import header, render, to_yaml
    from sizing.deploy.rendering import RenderOptions

    opts = RenderOptions(
        namespace=args.namespace,
        cluster_name=args.cluster_name,
        node_role=args.node_role,
        ami_family=args.ami_family,
        ami_version=args.ami_version,
        replicas=args.replicas,
        autoscale=not args.no_autoscale,
        purpose=args.purpose,
        capacity_reservation=args.capacity_reservation,
        zones=[z.strip() for z in args.zones.split(",") if z.strip()] if args.zones else None,
        adapter_namespace=args.adapter_namespace,
        **_business_hours(args),
    )
    comment = ""
    if args.rbac:
        from sizing.deploy.rbac import rbac

        objs = rbac(opts, args.rbac)
    elif not args.architecture:
        raise InvalidInput("--architecture is required (or --rbac)")
    else:
        arch = load_architecture(args)
        objs = render(arch, args.run_id, args.candidate_id or arch.id, opts)
        comment = header(objs, opts)
    # Everything that can refuse runs before the first file is written.
    if args.validate:
        checks.validate(objs)
        report = sys.stderr if not args.out else sys.stdout
        print(f"validated {len(objs)} objects:", file=report)
        for line in checks.checked(objs):
            print(f"  {line}", file=report)
    if not args.out:
        print(to_yaml(objs, comment), end="")
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for obj in objs:
        target = out / f"{obj['kind'].lower()}.yaml"
        target.write_text(to_yaml([obj], comment))
        print(target)
    return 0
