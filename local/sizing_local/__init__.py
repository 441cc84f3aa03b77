"""The local stack: what `sizing run` and `sizing serve` need to run the product on one machine with no AWS
account, and what the Lambda layer does not ship (template.yaml's layer is built from layers/sizing/ only).

- `sizing_local.stack`: moto as the embedded AWS (its server in this process), the template's table, bus,
  step functions and state machine deployed on it, Lambda `Invoke` dispatched in-process to the handlers.
- `sizing_local.twins`: candidates provisioned as local twins (`sizing twin` child processes on loopback).
- `sizing_local.serve`: `sizing serve`, the HTTP API on localhost backed by the embedded AWS.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

#: Seconds one load level is measured on the embedded default, after its warm-up. A level there is a twin on
#: loopback: 8 s gives a hundred or more requests per level at the twins' rates, and `make run` stays near a
#: minute. (A deployed run measures 60 s after 15 s: `sizing.orchestrate.settings`.)
STEP_S = 8.0
#: Seconds of warm-up before each measured window on the embedded default: half of it spreads the users' start
#: (`sizing.loadtest.sweep.RAMP_SHARE_OF_WARMUP`), and a twin is at steady state well within the rest.
WARMUP_S = 2.0
#: How many times faster than real time the embedded default's twins run (`sizing twin --time-scale`; the load
#: test reads their figures back in their own time, `sizing.loadtest.timescale`). Measured on this project's
#: 2-core machines (benchmarks/twin_capacity.py, benchmarks/local_run.py): see docs/loadgen.md.
TWIN_TIME_SCALE = 4.0


def _seconds(minimum_exclusive: bool) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"give a number of seconds, got {text!r}") from None
        if not math.isfinite(value) or value < 0 or (minimum_exclusive and value == 0):
            raise argparse.ArgumentTypeError(
                f"must be {'above' if minimum_exclusive else 'at least'} 0, got {text}"
            )
        return value

    return parse


def add_level_seconds(parser: argparse.ArgumentParser) -> None:
    """`--step-seconds` and `--warmup-seconds`, as `sizing run` and `sizing serve` both take them."""
    parser.add_argument(
        "--step-seconds",
        type=_seconds(minimum_exclusive=True),
        default=STEP_S,
        help=f"seconds each load level is measured (default {STEP_S:g})",
    )
    parser.add_argument(
        "--warmup-seconds",
        type=_seconds(minimum_exclusive=False),
        default=WARMUP_S,
        help=f"seconds of warm-up before each level's measured window, not counted (default {WARMUP_S:g})",
    )
