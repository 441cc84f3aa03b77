"""A load test against a server whose clock runs K times faster than the wall's (a time-scaled twin:
`sizing twin --time-scale K`), given and reported in the server's own time.

The settings say what to do in the server's time (rates, windows, SLO limits, think times); the load-test process
runs them on the wall clock (`on_wall_clock`: rates times K, seconds over K) and every step it measured is read
back in the server's time (`in_model_time`: latencies and durations times K, rates over K). A twin's model does
the same work in a K-th of the wall time, so a level needs a K-th of the time for the same number of requests,
and its verdicts are the same: scaling the latencies and the limits by one factor changes no comparison.

What does not scale is the client's own overhead (its timers, its parsing of the stream): it adds K times its
wall time to each latency read back, so K stays small enough that this stays well under the SLO's resolution
(`sizing_local.TWIN_TIME_SCALE` says how it was chosen)."""

from __future__ import annotations

from typing import Any

from sizing.loadtest.config import LoadTestConfig, SloTarget
from sizing.loadtest.metrics import Distribution, StepResult, check_slo

#: a level's target keys that are rates (scale over K) and seconds (scale times K)
RATE_KEYS = ("rate_rps",)
SECONDS_KEYS = ("think_time_s",)
#: a server window's time figures (its `seconds`, means in ms or s) and its rates
SERVER_SECONDS = ("seconds", "ttft_ms", "itl_ms", "tpot_ms", "e2e_s", "queue_ms")
SERVER_RATES = ("output_tokens_per_s",)


def _limits(targets: list[SloTarget], k: float) -> list[SloTarget]:
    return [t.model_copy(update={"limit": t.limit / k}) for t in targets]


def _over(value: float | None, k: float) -> float | None:
    return None if value is None else value / k


def on_wall_clock(cfg: LoadTestConfig) -> LoadTestConfig:
    """The settings as the load-test process runs them against the time-scaled server (themselves when K is 1):
    rates K times higher, every duration and SLO limit K times shorter."""
    k = cfg.time_scale
    if k == 1.0:
        return cfg
    update: dict[str, Any] = {
        "time_scale": 1.0,
        "levels": [x * k for x in cfg.levels] if cfg.mode == "rate" else list(cfg.levels),
        "think_time_s": cfg.think_time_s / k,
        "duration_s": cfg.duration_s / k,
        "warmup_s": cfg.warmup_s / k,
        "max_tail_s": _over(cfg.max_tail_s, k),
        "max_window_s": _over(cfg.max_window_s, k),
        "max_total_s": _over(cfg.max_total_s, k),
        "request_timeout_s": cfg.request_timeout_s / k,
        "slo": _limits(cfg.slo, k),
    }
    if cfg.max_tail_s is None:
        # the default tail cap (the window, at least a minute, at most the request timeout) in the server's time
        update["max_tail_s"] = cfg.tail_cap_s / k
    if cfg.capacity_search is not None:
        c = cfg.capacity_search
        update["capacity_search"] = c.model_copy(
            update={"start": c.start * k, "max_rate": None if c.max_rate is None else c.max_rate * k}
        )
    if cfg.sla_search is not None:
        s = cfg.sla_search
        rate = cfg.mode == "rate"
        update["sla_search"] = s.model_copy(
            update={
                "targets": _limits(s.targets, k),
                "start": s.start * k if rate else s.start,
                "max_level": s.max_level * k if rate else s.max_level,
                "resolution": s.resolution * k if rate and not s.relative else s.resolution,
            }
        )
    return cfg.model_copy(update=update)


def _times(d: Distribution, k: float) -> Distribution:
    return d.model_copy(
        update={f: _times_value(getattr(d, f), k) for f in ("mean", "p50", "p90", "p95", "p99", "max")}
    )


def _times_value(value: float | None, k: float) -> float | None:
    return None if value is None else round(value * k, 6)


def in_model_time(r: StepResult, cfg: LoadTestConfig) -> StepResult:
    """A step measured on the wall clock against a server K times faster, in the server's time: what the same
    step would read against a server running in real time. `cfg` is the settings in the server's time."""
    k = cfg.time_scale
    if k == 1.0:
        return r
    target = {
        key: value / k if key in RATE_KEYS else value * k if key in SECONDS_KEYS else value
        for key, value in r.target.items()
    }
    checks = [
        c.model_copy(
            update={
                "limit": round(c.limit * k, 6),
                "value": _times_value(c.value, k),
                "ci_low": _times_value(c.ci_low, k),
                "ci_high": _times_value(c.ci_high, k),
            }
        )
        for c in r.checks
    ]
    server = r.server
    if server is not None:
        server = server.model_copy(
            update={
                **{f: _times_value(getattr(server, f), k) for f in SERVER_SECONDS},
                **{f: _over(getattr(server, f), k) for f in SERVER_RATES},
            }
        )
    scaled = r.model_copy(
        update={
            "target": target,
            "duration_s": r.duration_s * k,
            "warmup_s": r.warmup_s * k,
            "ttft_ms": _times(r.ttft_ms, k),
            "tpot_ms": _times(r.tpot_ms, k),
            "itl_ms": _times(r.itl_ms, k),
            "e2e_s": _times(r.e2e_s, k),
            "requests_per_s": r.requests_per_s / k,
            "output_tokens_per_s": r.output_tokens_per_s / k,
            "checks": checks,
            "server": server,
            # counts, their noise and the waits' slope (seconds of wait per second sent) read the same in either time
            "overload": None
            if r.overload is None
            else r.overload.model_copy(
                update={
                    "window_s": round(r.overload.window_s * k, 3),
                    "fill_s": round(r.overload.fill_s * k, 3),
                }
            ),
        }
    )
    if r.meets_slo is None:
        return scaled
    # the same verdict (latencies and limits scaled alike); its reasons read in the server's time
    targets = cfg.sla_search.targets if cfg.sla_search else cfg.slo
    return check_slo(scaled, [(t.metric, t.percentile, t.limit) for t in targets])
