"""Spec -> WorkloadModel: what the estimator needs, arrival rates by hour, concurrency, token-length
distributions and the SLO set, from a spec or a recorded trace; the model's context limit checked against the
workload's longest requests."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sizing.base.distributions import TokenDistribution
from sizing.base.errors import InvalidInput, Problem
from sizing.workload.parse import PRESETS, read_token_samples, token_distribution
from sizing.workload.spec import MIN_PEAK_RPS, SLO, Traffic, WorkloadSpec, shared_prefix_problem

if TYPE_CHECKING:
    from sizing.traces.recorded import Recorded
    from sizing.traces.replay import TraceReplay


# --- the derived model -----------------------------------------------------------------------------------
#: Business hours: 09:00-18:00 local at full weight, shoulders at 09:00-1 and 18:00 at half, night at 5%.
#: The night floor keeps background traffic (other timezones, batch jobs) and min_replicas meaningful.
BUSINESS_HOURS = [0.05] * 7 + [0.3, 0.6] + [1.0] * 9 + [0.6, 0.3] + [0.1] * 2 + [0.05] * 2


#: Days in an average month (365.25 / 12), and the weekdays among them (5 of every 7).
DAYS_PER_MONTH = 365.25 / 12
WEEKDAYS_PER_MONTH = DAYS_PER_MONTH * 5 / 7


def _weights(traffic: Traffic) -> list[float]:
    if traffic.profile == "flat":
        return [1.0] * 24
    if traffic.profile == "business-hours":
        return list(BUSINESS_HOURS)
    w = list(traffic.profile)
    top = max(w)
    return [x / top for x in w]


@dataclass
class WorkloadModel:
    """What the estimator needs: rates by hour, concurrency, token distributions and SLOs."""

    spec: WorkloadSpec
    model_id: str
    peak_rps: float
    hourly_rps: list[float]  # 24 values, index = local hour of day
    input_tokens: TokenDistribution
    output_tokens: TokenDistribution
    peak_active_users: int | None
    think_time_s: float | None
    notes: list[str] = field(default_factory=list)
    #: tokens at the start of every prompt common to all requests (`tokens.shared_prefix`; 0: none declared)
    shared_prefix_tokens: int = 0
    #: the trace's window the estimator replays instead of Poisson arrivals (None: no trace, or trace.replay false)
    replay: TraceReplay | None = None
    #: what the trace says (`sizing.traces.summarize`), with how it was scaled; None without a trace
    trace: dict[str, Any] | None = None

    @property
    def avg_rps(self) -> float:
        """The average rate over a day with traffic (a weekday, for business hours)."""
        return sum(self.hourly_rps) / 24

    @property
    def traffic_days_per_month(self) -> float:
        """Days a month with this traffic: business hours run Monday to Friday (about 21.7 of 30.44 days; weekends
        carry none and the fleet holds min_replicas), any other profile every day."""
        return WEEKDAYS_PER_MONTH if self.spec.traffic.profile == "business-hours" else DAYS_PER_MONTH

    @property
    def requests_per_month(self) -> float:
        """Requests in an average month: a traffic day's requests x the days with traffic."""
        return self.avg_rps * 86400 * self.traffic_days_per_month

    @property
    def slo(self) -> SLO:
        return self.spec.slo

    @property
    def request_seconds_estimate(self) -> float:
        """Time a request is in flight, for Little's law, from the SLO alone (the planner refines it with
        predicted latencies): TTFT + TPOT x mean output tokens when both are bounded, else the e2e bound,
        else a 1 s TTFT and 50 ms/token (typical interactive serving) -- the slowest the SLO allows."""
        slo = self.spec.slo
        if not (slo.ttft_ms or slo.tpot_ms or slo.e2e_s):
            return slo.targets()[0][2]  # a deadline alone: a job's request waits at most this long
        if slo.ttft_ms and slo.tpot_ms:
            ttft = max(v for _, v in slo.ttft_ms.items()) / 1000
            tpot = max(v for _, v in slo.tpot_ms.items()) / 1000
            basis = ttft + tpot * max(self.output_tokens.mean - 1, 0)
            if slo.e2e_s:
                basis = min(basis, max(v for _, v in slo.e2e_s.items()))
            return basis
        if slo.e2e_s:
            return max(v for _, v in slo.e2e_s.items())
        ttft = max(v for _, v in slo.ttft_ms.items()) / 1000 if slo.ttft_ms else 1.0
        tpot = max(v for _, v in slo.tpot_ms.items()) / 1000 if slo.tpot_ms else 0.05
        return ttft + tpot * max(self.output_tokens.mean - 1, 0)

    @property
    def peak_concurrency(self) -> float:
        """Little's law: requests in flight = arrival rate x time in the system."""
        return self.peak_rps * self.request_seconds_estimate

    def derived(self) -> dict[str, Any]:
        i, o = self.input_tokens, self.output_tokens
        return {
            "name": self.spec.name,
            "model": self.model_id,
            "peak_rps": round(self.peak_rps, 4),
            "avg_rps": round(self.avg_rps, 4),
            "peak_active_users": self.peak_active_users,
            "peak_concurrency": round(self.peak_concurrency, 2),
            "concurrency_basis_s": round(self.request_seconds_estimate, 3),
            "think_time_s": None if self.think_time_s is None else round(self.think_time_s, 2),
            "requests_per_day": round(self.avg_rps * 86400),
            "requests_per_month": round(self.requests_per_month),
            "traffic_days_per_month": round(self.traffic_days_per_month, 2),
            "input_tokens": i.describe(),
            "output_tokens": o.describe(),
            "shared_prefix_tokens": self.shared_prefix_tokens,
            "input_tokens_per_s_peak": round(self.peak_rps * i.mean, 1),
            "output_tokens_per_s_peak": round(self.peak_rps * o.mean, 1),
            "hourly_rps": [round(x, 4) for x in self.hourly_rps],
            "timezone": self.spec.traffic.timezone,
            "slo": self.spec.slo.model_dump(exclude_none=True),
            "notes": self.notes,
            **({"trace": self.trace} if self.trace is not None else {}),
        }


def from_trace(spec: WorkloadSpec, notes: list[str], s3_client: Any = None) -> Recorded:
    """What `spec.trace` says, for the workload model; `notes` gets what replaced what."""
    # numpy and the readers: only a spec with a trace pays for them
    from sizing.traces.recorded import recorded, short_for_slo

    assert spec.trace is not None
    t = spec.trace
    rec = recorded(t.path, t.format, t.model, replay=t.replay, s3_client=s3_client)
    n = rec.figures["requests"]
    if short := short_for_slo(n, [q for _, q, _ in spec.slo.targets()]):
        rec.figures["notes"] = [*rec.figures["notes"], short]
    notes.append(
        f"trace {Path(t.path).name if not t.path.startswith('s3://') else t.path} ({rec.figures['format']},"
        f" {n:,} requests): its lengths replace tokens.input/output"
        + (", its arrivals and prefix hits replace Poisson arrivals" if t.replay else "")
    )
    if spec.users is not None or spec.rate is not None:
        notes.append(
            f"the trace's busiest hour ({rec.peak_rps:.3g} requests/s) is time-scaled to the peak the spec gives"
        )
    else:
        notes.append(f"peak = the trace's busiest hour: {rec.peak_rps:.3g} requests/s")
    return rec


def _peak(spec: WorkloadSpec, notes: list[str]) -> tuple[float, int | None, float | None]:
    """(peak requests/s, active users at peak, think time per request) as the spec states them; a trace without
    users or rate gives 0 here: its busiest hour sets the peak (`build_model`)."""
    if spec.users is None:
        return (spec.rate.peak_rps if spec.rate is not None else 0.0), None, None
    u = spec.users
    peak = u.peak_rps()
    notes.append(
        f"{u.total:,} users x {u.peak_active_fraction:.0%} active x {u.requests_per_active_hour:g} requests/hour"
        f" = {peak:.2f} requests/s at peak"
    )
    if peak < MIN_PEAK_RPS:
        # sized as a rate: closed-loop users who think for days between requests model nothing
        notes.append(
            f"these users send {peak:.3g} requests per second at peak, below the smallest load sized"
            f" ({MIN_PEAK_RPS:g}/s): sized at {MIN_PEAK_RPS:g}/s, which min_replicas serve"
        )
        return MIN_PEAK_RPS, None, None
    return peak, max(1, round(u.total * u.peak_active_fraction)), 3600.0 / u.requests_per_active_hour


def build_model(spec: WorkloadSpec, model_id: str | None = None) -> WorkloadModel:
    """Derive the WorkloadModel. `model_id` is the catalog id the spec's model resolved to (if looked up)."""
    notes: list[str] = []
    peak, active_users, think = _peak(spec, notes)
    weights = _weights(spec.traffic)
    hourly = [peak * w for w in weights]
    replay: TraceReplay | None = None
    trace_figures: dict[str, Any] | None = None
    if spec.trace is not None:
        recorded = from_trace(spec, notes)
        i_dist, o_dist, replay, trace_figures = recorded.inp, recorded.out, recorded.replay, recorded.figures
        if spec.users is None and spec.rate is None:
            peak = recorded.peak_rps
            if peak < MIN_PEAK_RPS:
                why = (
                    f"its {trace_figures['requests']:,} requests span no time, so it gives no rate: give rate.peak_rps"
                    " or users to size it for"
                )
                raise InvalidInput(f"trace: {why}", [Problem("trace", why)])
        trace_figures["sized_peak_rps"] = round(peak, 4)
        trace_figures["time_scale"] = round(peak / recorded.peak_rps, 4) if recorded.peak_rps > 0 else None
        hourly = [peak * w for w in (recorded.weights or weights)]
        if recorded.weights is None:
            shape = spec.traffic.profile if isinstance(spec.traffic.profile, str) else "24 hourly weights"
            notes.append(f"the trace covers less than a day: the day's shape is traffic.profile ({shape})")
        prefix = (
            spec.tokens.shared_prefix if spec.tokens.shared_prefix is not None else recorded.shared_prefix
        )
        if spec.tokens.input or spec.tokens.output:
            notes.append("a trace is given: its lengths replace tokens.input/output")
    elif spec.tokens.samples_file:
        ins, outs = read_token_samples(spec.tokens.samples_file)
        i_dist, o_dist = TokenDistribution.empirical(ins), TokenDistribution.empirical(outs)
        if spec.tokens.input or spec.tokens.output:
            notes.append("tokens.samples_file given: its samples replace tokens.input/output")
    else:
        assert spec.tokens.input is not None and spec.tokens.output is not None
        i_dist, o_dist = token_distribution(spec.tokens.input), token_distribution(spec.tokens.output)
    if spec.trace is None:
        prefix = spec.tokens.shared_prefix or 0
    problem = shared_prefix_problem(prefix, i_dist.mean)
    if problem:  # a samples_file's mean (the spec's own input was checked when it was parsed)
        raise InvalidInput(f"tokens.shared_prefix: {problem}", [Problem("tokens.shared_prefix", problem)])
    if spec.preset:
        notes.append(f"preset {spec.preset}: {PRESETS[spec.preset]['reason']}")
    wm = WorkloadModel(
        spec=spec,
        model_id=model_id or spec.model,
        peak_rps=peak,
        hourly_rps=hourly,
        input_tokens=i_dist,
        output_tokens=o_dist,
        peak_active_users=active_users,
        think_time_s=think,
        notes=notes,
        shared_prefix_tokens=prefix,
        replay=replay,
        trace=trace_figures,
    )
    if think is not None:
        # a user's cycle is request time + think time; what is left of the cycle is thinking
        wm.think_time_s = max(0.0, think - wm.request_seconds_estimate)
    return wm


def resolve(spec: WorkloadSpec, catalog: Any | None = None) -> WorkloadModel:
    """Look the model up in the catalog (clear error with suggestions when unknown) and derive the model."""
    from sizing.catalog import load_catalog

    cat = catalog or load_catalog()
    model = cat.model(spec.model)
    wm = build_model(spec, model.id)
    check_context(wm, model.id, model.max_position_embeddings)
    return wm


def context_limit(spec: WorkloadSpec, model_context: int) -> int:
    """The longest request a deployment may serve: the model's context, or `constraints.max_context_tokens` if
    lower."""
    cap = spec.constraints.max_context_tokens
    return min(model_context, cap) if cap else model_context


def check_context(wm: WorkloadModel, model_id: str, model_context: int) -> None:
    """Refuse a workload whose requests exceed the allowed context at p99: no deployment serves them. `sizing
    predict` refuses the same case for its one request shape."""
    p_in, p_out = wm.input_tokens.percentile("p99"), wm.output_tokens.percentile("p99")
    limit = context_limit(wm.spec, model_context)
    what = f"{model_id}'s context of {limit:,} tokens"
    if limit < model_context:
        what = f"the allowed context of {limit:,} tokens (constraints.max_context_tokens)"
    problems: list[Problem] = []
    if p_in > limit:
        problems.append(Problem("tokens.input", f"p99 of {p_in:,.0f} tokens exceeds {what}"))
    if p_out > limit:
        problems.append(Problem("tokens.output", f"p99 of {p_out:,.0f} tokens exceeds {what}"))
    if not problems and p_in + p_out > limit:
        problems.append(
            Problem(
                "tokens.input",
                f"p99 input + p99 output = {p_in + p_out:,.0f} tokens exceeds {what}; shorten prompts or answers",
            )
        )
    if problems:
        raise InvalidInput(f"the workload's longest requests do not fit: {problems[0].message}", problems)
