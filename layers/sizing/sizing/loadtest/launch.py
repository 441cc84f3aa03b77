"""Start a load test as its own process (Locust must not share a process with boto3 or the caller) and read its
results back. The local state-machine run and `sizing loadtest` call `run_sweep` / `run_config`."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sizing.base.errors import InvalidInput, Problem, problems_from_pydantic
from sizing.loadtest.config import LoadTestConfig, SlaSearchSpec, SloTarget, fresh_seed
from sizing.loadtest.metrics import StepResult
from sizing.workload.spec import TokenSpec

#: Time allowed on top of the planned steps for process start, worker connection and shutdown.
LAUNCH_MARGIN_S = 90.0


def planned_seconds(cfg: LoadTestConfig) -> float:
    """Upper bound of the sweep's duration: per step the warm-up, the window and a tail of at most its cap (plus a
    worker report interval in distributed mode), rounded up to Locust's 1 s shape tick."""
    if cfg.capacity_search is not None:
        steps = cfg.capacity_search.max_levels
    else:
        steps = cfg.sla_search.max_steps if cfg.sla_search is not None else len(cfg.levels)
    per_step = math.ceil(cfg.warmup_s + cfg.window_cap_s + cfg.tail_cap_s) + 1 + (4 if cfg.workers else 0)
    total = steps * per_step
    return min(total, cfg.max_total_s + per_step) if cfg.max_total_s else total


def read_steps(out_dir: str | Path) -> list[StepResult]:
    path = Path(out_dir) / "steps.jsonl"
    if not path.exists():
        return []
    return [StepResult.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]


def run_config(cfg: LoadTestConfig, *, quiet: bool = False) -> list[StepResult]:
    """Write the config into its out_dir, run the load-test process, return the steps it measured."""
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg_path = out / "config.json"
    cfg_path.write_text(cfg.model_dump_json(indent=2))
    timeout = planned_seconds(cfg) + LAUNCH_MARGIN_S
    cmd = [sys.executable, "-m", "sizing.loadtest.process", "run", str(cfg_path)]
    log_path = out / "locust.log"
    with log_path.open("w") as log:
        # progress lines (stderr) reach the caller's terminal unless quiet; Locust's own log goes to the file
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        try:
            for line in proc.stderr:
                log.write(line)
                if not quiet and line.startswith("step "):
                    print(line.rstrip(), file=sys.stderr, flush=True)
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise InvalidInput(f"the load test ran past its {timeout:.0f} s bound and was stopped") from None
        finally:
            if proc.poll() is None:
                proc.kill()
    if rc != 0:
        tail = log_path.read_text().splitlines()[-15:]
        raise InvalidInput(f"the load-test process failed (exit {rc}):\n" + "\n".join(tail))
    return read_steps(out)


def parse_tokens(text: str | int | TokenSpec, field_name: str) -> TokenSpec:
    """`512` (fixed), `1200:3500` (mean:p95) or a TokenSpec."""
    if isinstance(text, TokenSpec):
        return text
    if isinstance(text, int):
        return TokenSpec(fixed=text)
    try:
        if ":" in text:
            mean, p95 = (float(x) for x in text.split(":", 1))
            return TokenSpec(mean=mean, p95=p95)
        return TokenSpec(fixed=int(text))
    except ValueError as exc:
        raise InvalidInput(
            f"{field_name}: give N (fixed) or MEAN:P95, got {text!r}", [Problem(field_name, str(exc))]
        ) from None


def run_sweep(
    endpoint: str,
    model: str,
    levels: Sequence[float],
    *,
    out_dir: str | Path,
    mode: str = "concurrency",
    input_tokens: str | int | TokenSpec = 512,
    output_tokens: str | int | TokenSpec = 128,
    duration_s: float | None = None,
    warmup_s: float | None = None,
    slo: Sequence[tuple[str, str, float]] = (),
    sla_search: bool = False,
    workers: int = 0,
    quiet: bool = False,
    **extra: Any,
) -> list[StepResult]:
    """Sweep `levels` (concurrency, rates in req/s, or users) against `endpoint` and return one StepResult per
    step. With `sla_search`, `levels[0]` is where the search starts and `slo` ((metric, percentile, limit)
    triples) decides what passes. Extra keyword arguments are LoadTestConfig fields."""
    targets = [SloTarget(metric=m, percentile=p, limit=v) for m, p, v in slo]
    search = None
    if sla_search:
        if not targets:
            raise InvalidInput(
                "an SLA search needs SLO targets", [Problem("slo", "give at least one target")]
            )
        start = levels[0] if levels else 1
        search = SlaSearchSpec(
            targets=targets, start=start, resolution=1 if mode != "rate" else 0.1, relative=mode == "rate",
            **({"max_level": extra.pop("max_level")} if "max_level" in extra else {}),
        )  # fmt: skip
    fields: dict[str, Any] = {
        "endpoint": endpoint,
        "model": model,
        "mode": mode,
        "levels": [] if sla_search else list(levels),
        "input_tokens": parse_tokens(input_tokens, "input_tokens"),
        "output_tokens": parse_tokens(output_tokens, "output_tokens"),
        "slo": targets,
        "sla_search": search,
        "workers": workers,
        "out_dir": str(out_dir),
        # fresh prompts unless the caller names a seed: two sweeps against one server (a grid's levels, a rerun) must
        # not find each other's prompts in its prefix cache (a grid measured with one seed per level read 24-99% of
        # its prompt tokens from the cache: docs/engine.md, "The first grid's prompts")
        "seed": fresh_seed(),
        **extra,
    }
    if duration_s is not None:
        fields["duration_s"] = duration_s
    if warmup_s is not None:
        fields["warmup_s"] = warmup_s
    return run_config(_validated(fields), quiet=quiet)


def _validated(fields: dict[str, Any]) -> LoadTestConfig:
    from pydantic import ValidationError

    try:
        return LoadTestConfig.model_validate(fields)
    except ValidationError as exc:
        raise InvalidInput("the load-test settings are not valid", problems_from_pydantic(exc)) from None
