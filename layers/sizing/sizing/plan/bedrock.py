"""Amazon Bedrock in every mode it is sold for a workload: on-demand in the Standard, Priority and Flex tiers, the
Reserved tier and Provisioned Throughput when priced, and batch inference for a batch workload -- each an
architecture, or the reason it is rejected."""

from __future__ import annotations

import math
from typing import Any

from sizing.catalog import load_catalog
from sizing.catalog.modes import Modes, ServiceTiers, load_modes
from sizing.catalog.offerings import BedrockChoice
from sizing.perf.managed import REFERENCE_PROMPT_TOKENS, PromptPrefill, assumed_prefill, bedrock_ttft_ms
from sizing.plan.cost import (
    BATCH_E2E_S,
    BEDROCK_BATCH_WINDOW_H,
    COMMITTED_TPM_HEADROOM,
    HOURS_PER_MONTH,
    batch_deadline_h,
    bedrock_batch_bill,
    bedrock_bill,
    peak_tokens_per_minute,
    provisioned_throughput_bill,
    provisioned_units,
    reserved_tier_bill,
)
from sizing.plan.margin import describe_violation
from sizing.plan.state import SearchState
from sizing.results import Architecture, Cost, QuotaFlag, Rejected, RejectedKind
from sizing.workload.derived import WorkloadModel


def bedrock_architectures(
    s: SearchState, batch: bool, modes_cfg: Modes
) -> tuple[list[Architecture], list[Architecture]]:
    """Bedrock in every mode it is sold: (the feasible ones within budget, every one priced -- managed options)."""
    feasible: list[Architecture] = []
    managed: list[Architecture] = []
    for choice in s.enum.bedrock:
        for bedrock_arch, refused in _bedrock_options(s.wm, choice, batch, modes_cfg):
            if bedrock_arch is not None:
                managed.append(bedrock_arch)
            if refused is not None:
                s.rejected.append(refused)
            elif bedrock_arch is None:
                continue  # not sold in this mode for the offer (no price known)
            elif s.over_budget(bedrock_arch.ranked_usd_per_month):
                s.rejected.append(
                    Rejected(
                        id=bedrock_arch.id,
                        kind=RejectedKind.budget,
                        reason=f"over budget: ${bedrock_arch.ranked_usd_per_month:,.0f}/month",
                    )
                )
            else:
                feasible.append(bedrock_arch)
    return feasible, managed


#: An offer in one mode: its architecture (None where it cannot be served or priced) and why it is not ranked (None
#: where it is).
Offered = tuple[Architecture | None, Rejected | None]


def _refused(rid: str, kind: RejectedKind, reason: str) -> Rejected:
    return Rejected(id=rid, kind=kind, reason=reason)


def _bedrock_options(wm: WorkloadModel, choice: BedrockChoice, batch: bool, modes: Modes) -> list[Offered]:
    """Every way the offer is sold for the workload: the Standard tier, Priority and Flex where the model has them,
    Provisioned Throughput and Reserved when priced, and batch inference for a batch workload."""
    out: list[Offered] = []
    standard, refused = _bedrock(wm, choice, "standard", modes, batch)
    if standard is not None and modes.bedrock_provisioned.offers.get(choice.offer.bedrock_model_id) is None:
        standard = standard.model_copy(update={"notes": [*standard.notes, _unpriced_note(choice, modes)]})
    out.append((standard, refused))
    if modes.bedrock_service_tiers.offers_tiers(choice.offer.bedrock_model_id):
        out.extend(_bedrock(wm, choice, tier, modes, batch) for tier in TIERS[1:])
        out.append(_bedrock_reserved(wm, choice, modes, standard))
    out.append(_bedrock_provisioned(wm, choice, modes, standard))
    if batch:
        out.append(_bedrock_batch(wm, choice))
    return out


def _bedrock(
    wm: WorkloadModel,
    choice: BedrockChoice,
    tier: str = "standard",
    modes: Modes | None = None,
    batch: bool = False,
) -> Offered:
    """A Bedrock on-demand architecture in a service tier (Standard, Priority or Flex), or the reason it is
    rejected. A default quota below the peak is a caveat (`quota`), not a rejection: AWS raises it on request; the
    three tiers share the on-demand quota. Hard limits (a non-adjustable quota, the context window) and SLO misses
    reject. Priority's latency is Standard's with AWS's "up to 25%" faster output (assumed); Flex has no published
    latency bound, so it is ranked only for batch workloads."""
    offer = choice.offer
    tiers = (modes or load_modes()).bedrock_service_tiers
    rid = f"bedrock:{choice.invoke_id}" + ("" if tier == "standard" else f":{tier}")
    flag, hard = _bedrock_quota(wm, choice)
    if hard:
        return None, _refused(rid, RejectedKind.quota, hard)
    max_tokens = wm.output_tokens.percentile(BEDROCK_MAX_TOKENS_PERCENTILE)
    if offer.context_tokens and wm.input_tokens.percentile("p95") + max_tokens > offer.context_tokens:
        return None, _refused(
            rid,
            RejectedKind.quota,
            f"over a hard Bedrock limit: p95 input {wm.input_tokens.percentile('p95'):,.0f} + max_tokens"
            f" {max_tokens:,.0f} exceeds {offer.name}'s {offer.context_tokens:,}-token context window",
        )
    lat = offer.latency
    if lat is None:
        return None, _refused(
            rid,
            RejectedKind.unsupported,
            f"no latency profile for {offer.name} on Bedrock (not measured, none assumed)",
        )
    if tier == "priority":
        lat = lat.model_copy(
            update={
                "output_tokens_per_s": lat.output_tokens_per_s * tiers.priority_output_speedup,
                "source": f"{lat.source}; Priority: {tiers.priority_latency_source}",
            }
        )
    spec = load_catalog().models.get(wm.model_id)
    prefill = assumed_prefill(spec, load_catalog()) if spec is not None else None
    predicted = _bedrock_predicted(wm, lat, prefill)
    bad = [
        describe_violation(m, p, predicted[m][p if p in predicted[m] else "p95"], limit)
        for m, p, limit in wm.slo.targets()
        if predicted[m][p if p in predicted[m] else "p95"] > limit
    ]
    users = wm.spec.users.total if wm.spec.users else None
    prices = choice.prices
    multiple = _tier_multiple(tiers, tier)
    usd_in = round(prices.input_usd_per_1m_tokens * multiple, 6)
    usd_out = round(prices.output_usd_per_1m_tokens * multiple, 6)
    cost = bedrock_bill(wm, usd_in, usd_out, users)
    cost["price"] = {
        "source": prices.source,
        "as_of": str(prices.as_of),
        "assumed": prices.assumed,
        "region": choice.region,
        "tier": tier,
        "tier_multiple": multiple,
        **({"tier_source": tiers.source, "tier_as_of": str(tiers.as_of)} if tier != "standard" else {}),
    }
    notes = [
        "latency profile assumed until measured: " + lat.source,
        (
            f"TTFT grows with the prompt: the stated short-chat TTFT plus the prompt's prefill beyond"
            f" {REFERENCE_PROMPT_TOKENS} tokens ({prefill.basis})"
            if prefill is not None
            else "TTFT is the stated short-chat figure at any prompt length (the model's architecture is not in"
            " the catalog): a long prompt's prefill comes on top of it"
        ),
        _price_note(choice),
        _scope_note(choice),
    ]
    if tier != "standard":
        notes.insert(
            1,
            f"{tier.capitalize()} tier: {multiple:g} x the Standard price = ${usd_in:g} in / ${usd_out:g} out per 1M"
            f" tokens in {choice.region} (as of {tiers.as_of}: {tiers.source})",
        )
    if tier == "flex":
        notes.insert(1, "Flex tier: " + tiers.flex_latency_source)
    if flag is not None and flag.needs_increase:
        notes.insert(0, f"{flag.message}: {flag.request}")
    arch = _bedrock_row(
        wm,
        id=rid,
        predicted=predicted,
        meets_slo=not bad and (tier != "flex" or batch),
        cost=cost,
        bedrock={
            "model_id": choice.invoke_id,
            "base_model_id": offer.bedrock_model_id,
            "mode": "on-demand",
            "tier": tier,
            "scope": choice.scope,
            "region": choice.region,
            "quota": offer.quota.model_dump(mode="json"),
            "max_tokens": round(max_tokens),
            "latency_assumed": lat.assumed,
            "latency_source": lat.source,
        },
        quota=flag,
        service_tier=tier,
        region=choice.region,
        notes=notes,
    )
    if bad:
        return arch, _refused(rid, RejectedKind.slo, "; ".join(bad) + " (assumed Bedrock latency profile)")
    if tier == "flex" and not batch:
        return arch, _refused(
            rid,
            RejectedKind.slo,
            "Flex tier: lower priority than Standard under high demand and no published latency bound; ranked only"
            f" for batch workloads (preset batch or an e2e SLO of {BATCH_E2E_S / 3600:g} h or more)",
        )
    return arch, None


#: Bedrock service tiers sold per request (`service_tier`): Priority and Flex are priced as multiples of Standard.
TIERS = ("standard", "priority", "flex")


def _bedrock_row(wm: WorkloadModel, **fields: Any) -> Architecture:
    """A Bedrock answer for the workload's model: billed on demand, nothing deployed, nothing measured; `fields` say
    the offer (id, predicted figures, cost, the `bedrock` block, ...)."""
    return Architecture(
        model=wm.spec.model,
        catalog_model=wm.model_id,
        deployment="bedrock",
        engine="bedrock",
        capacity_type="on-demand",
        measured=None,
        **fields,
    )


def _tier_multiple(tiers: ServiceTiers, tier: str) -> float:
    return {"standard": 1.0, "priority": tiers.priority_multiple, "flex": tiers.flex_multiple}[tier]


#: The output budget a Bedrock request reserves (`max_tokens`): the p99 of the workload's output lengths, so 99% of
#: answers finish within it. Bedrock reserves input + max_tokens against the tokens-per-minute quota at request start.
BEDROCK_MAX_TOKENS_PERCENTILE = "p99"


#: A quota increase is asked for with room above the peak need, rounded up to this many tokens (or requests) per
#: minute: the need is an hourly mean, and a minute within the hour runs above it.
QUOTA_REQUEST_HEADROOM = 1.2


QUOTA_ROUND_TOKENS = 100_000


QUOTA_ROUND_REQUESTS = 100


def _round_up(x: float, step: int) -> int:
    return int(math.ceil(x / step) * step)


def _bedrock_quota(wm: WorkloadModel, choice: BedrockChoice) -> tuple[QuotaFlag | None, str | None]:
    """The quota caveat of a Bedrock offer at the workload's peak, or the hard limit that rejects it."""
    q = choice.offer.quota
    max_tokens = wm.output_tokens.percentile(BEDROCK_MAX_TOKENS_PERCENTILE)
    tpm = wm.peak_rps * 60 * (wm.input_tokens.mean + max_tokens)
    rpm = wm.peak_rps * 60
    over_t = bool(q.tokens_per_minute) and tpm > (q.tokens_per_minute or 0)
    over_r = bool(q.requests_per_minute) and rpm > (q.requests_per_minute or 0)
    if (over_t or over_r) and not q.adjustable:
        return None, (
            f"over a hard Bedrock limit: {tpm:,.0f} tokens/minute and {rpm:,.0f} requests/minute at peak exceed"
            f" {q.tokens_per_minute or '-'} / {q.requests_per_minute or '-'}, which AWS does not raise"
        )
    if not q.tokens_per_minute and not q.requests_per_minute:
        return (
            QuotaFlag(
                needs_increase=False,
                tokens_per_minute_needed=round(tpm),
                requests_per_minute_needed=round(rpm),
                message=f"needs {tpm:,.0f} tokens/min at peak; default quota not published (check Service Quotas)",
                source=q.source,
            ),
            None,
        )
    parts: list[str] = []
    need_t = _round_up(tpm * QUOTA_REQUEST_HEADROOM, QUOTA_ROUND_TOKENS) if over_t else None
    need_r = _round_up(rpm * QUOTA_REQUEST_HEADROOM, QUOTA_ROUND_REQUESTS) if over_r else None
    if need_t:
        parts.append(f"{need_t:,} tokens/min (default {q.tokens_per_minute:,})")
    if need_r:
        parts.append(f"{need_r:,} requests/min (default {q.requests_per_minute:,})")
    name = q.quota_name or f"tokens per minute for {choice.offer.name}"
    if not parts:
        return (
            QuotaFlag(
                needs_increase=False,
                tokens_per_minute_needed=round(tpm),
                tokens_per_minute_default=q.tokens_per_minute,
                requests_per_minute_needed=round(rpm),
                requests_per_minute_default=q.requests_per_minute,
                message=f"within the default quota: {tpm:,.0f} of {q.tokens_per_minute or 0:,} tokens/min at peak",
                source=q.source,
            ),
            None,
        )
    return (
        QuotaFlag(
            needs_increase=True,
            tokens_per_minute_needed=need_t or round(tpm),
            tokens_per_minute_default=q.tokens_per_minute,
            requests_per_minute_needed=need_r or round(rpm),
            requests_per_minute_default=q.requests_per_minute,
            message="needs a quota increase to " + " and ".join(parts),
            request=f"Service Quotas > Amazon Bedrock > '{name}' in {choice.region}: request"
            f" {need_t or need_r:,} (peak need {tpm:,.0f} tokens/min = {rpm:,.0f} requests/min x"
            f" ({wm.input_tokens.mean:,.0f} input + {max_tokens:,.0f} max_tokens))",
            source=q.source,
        ),
        None,
    )


def _bedrock_predicted(
    wm: WorkloadModel, lat: Any, prefill: PromptPrefill | None = None
) -> dict[str, dict[str, float]]:
    """Bedrock latencies from the offer's stated profile; TTFT grows with the prompt at each percentile by the
    prompt's prefill beyond the short chat the profile stands for (`sizing.perf.managed`)."""
    tpot_ms = 1000 / lat.output_tokens_per_s
    out = wm.output_tokens
    prompt = wm.input_tokens
    ttft = {
        "p50": bedrock_ttft_ms(lat.ttft_ms_p50, prompt.percentile("p50"), prefill),
        "p95": bedrock_ttft_ms(lat.ttft_ms_p95, prompt.percentile("p95"), prefill),
        "p99": bedrock_ttft_ms(lat.ttft_ms_p95 * 1.3, prompt.percentile("p99"), prefill),
    }
    tpot = {"p50": tpot_ms, "p95": tpot_ms * 1.2, "p99": tpot_ms * 1.4}
    e2e = {
        k: round((ttft[k] + tpot[k] * max(out.percentile(k) - 1, 0)) / 1000, 3) for k in ("p50", "p95", "p99")
    }
    return {
        "ttft_ms": {k: round(v, 1) for k, v in ttft.items()},
        "tpot_ms": {k: round(v, 1) for k, v in tpot.items()},
        "e2e_s": e2e,
    }


def _price_note(choice: BedrockChoice) -> str:
    p = choice.prices
    where = (
        choice.region
        if not p.assumed
        else f"us-east-1 (assumed for {choice.region}: no {choice.region} price found)"
    )
    return (
        f"prices from {where}: ${p.input_usd_per_1m_tokens:g} in / ${p.output_usd_per_1m_tokens:g} out per 1M"
        f" tokens, as of {p.as_of}: {p.source}"
    )


def _scope_note(choice: BedrockChoice) -> str:
    if choice.scope == "in-region":
        return f"in-Region: requests are served in {choice.region}"
    if choice.scope == "geography":
        return (
            f"cross-Region inference profile {choice.invoke_id}: requests from {choice.region} may be served in"
            " another Region of its geography, at the source Region's price"
        )
    return f"global inference profile {choice.invoke_id}: requests may be served in any Region"


def _unpriced_note(choice: BedrockChoice, modes: Modes) -> str:
    """What a buyer cannot be quoted here: Provisioned Throughput and (for tiered models) the Reserved tier."""
    pt = modes.bedrock_provisioned
    text = (
        f"Provisioned Throughput not priced: AWS shows model-unit prices and throughput only in the Bedrock console"
        f" ({' or '.join(pt.terms)} commitment for a base model; {pt.source}); a quote in"
        " $SIZING_CATALOG_DIR/modes.yaml ranks it"
    )
    tiers = modes.bedrock_service_tiers
    if tiers.offers_tiers(choice.offer.bedrock_model_id) and tiers.reserved.usd_per_1k_tpm_month is None:
        text += (
            "; Reserved tier not priced: a fixed price per 1K tokens-per-minute quoted by the AWS account team"
            f" (min {tiers.reserved.min_input_tpm:,} input / {tiers.reserved.min_output_tpm:,} output TPM)"
        )
    return text


def _committed_quota(units: int, what: str, region: str, name: str) -> QuotaFlag:
    return QuotaFlag(
        needs_increase=True,
        message=f"needs {units} {what} (the default quota for a commitment is 0)",
        request=f"AWS Support case: Amazon Bedrock {what} for {name} in {region}",
        source="docs.aws.amazon.com/bedrock/latest/userguide/prov-throughput.html",
    )


def _bedrock_provisioned(
    wm: WorkloadModel, choice: BedrockChoice, modes: Modes, on_demand: Architecture | None
) -> Offered:
    """Bedrock Provisioned Throughput for the offer when a model-unit price and throughput are known: units sized
    from the busiest hour's tokens per minute, billed every hour of the month. Ranked only when cheaper than the
    on-demand Standard tier for the workload (the question a buyer asks of a commitment)."""
    offer = choice.offer
    pt = modes.bedrock_provisioned.offers.get(offer.bedrock_model_id)
    if pt is None:
        return None, None
    in_tpm, out_tpm = peak_tokens_per_minute(wm)
    units = provisioned_units(in_tpm, out_tpm, pt.input_tpm_per_unit, pt.output_tpm_per_unit)
    monthly = provisioned_throughput_bill(pt.usd_per_hour_per_model_unit, units)
    users = wm.spec.users.total if wm.spec.users else None
    out_month = wm.requests_per_month * wm.output_tokens.mean
    cost = {
        "usd_per_hour_peak": round(units * pt.usd_per_hour_per_model_unit, 2),
        "usd_per_month": round(monthly, 2),
        "usd_per_million_output_tokens": round(monthly / (out_month / 1e6), 4) if out_month else None,
        "usd_per_user_month": round(monthly / users, 4) if users else None,
        "breakdown": {
            "model_units": units,
            "usd_per_hour_per_model_unit": pt.usd_per_hour_per_model_unit,
            "hours_per_month": HOURS_PER_MONTH,
            "term": pt.term,
            "peak_input_tokens_per_minute": round(in_tpm),
            "peak_output_tokens_per_minute": round(out_tpm),
            "input_tokens_per_minute_per_unit": pt.input_tpm_per_unit,
            "output_tokens_per_minute_per_unit": pt.output_tpm_per_unit,
            "sizing_headroom": COMMITTED_TPM_HEADROOM,
        },
        "price": {
            "source": pt.source,
            "as_of": str(pt.as_of),
            "assumed": pt.assumed,
            "region": choice.region,
            "tier": "provisioned",
        },
    }
    base = on_demand.predicted.model_dump(mode="json") if on_demand is not None else None
    meets = on_demand is not None and on_demand.meets_slo
    arch = _bedrock_row(
        wm,
        id=f"bedrock:{offer.bedrock_model_id}:provisioned",
        predicted=base or {"ttft_ms": {}, "tpot_ms": {}, "e2e_s": {}},
        meets_slo=meets,
        cost=cost,
        bedrock={
            "model_id": offer.bedrock_model_id,
            "base_model_id": offer.bedrock_model_id,
            "mode": "provisioned",
            "tier": "provisioned",
            "scope": "in-region",
            "region": choice.region,
            "model_units": units,
            "term": pt.term,
            "latency_assumed": True,
        },
        quota=_committed_quota(units, "Provisioned Throughput model units", choice.region, offer.name),
        service_tier="provisioned",
        region=choice.region,
        notes=[
            f"Provisioned Throughput: {units} model unit(s) x ${pt.usd_per_hour_per_model_unit:g}/h x"
            f" {HOURS_PER_MONTH:g} h = ${monthly:,.0f}/month ({pt.term} commitment), sized for the busiest"
            f" hour's {in_tpm:,.0f} input / {out_tpm:,.0f} output tokens/min x {COMMITTED_TPM_HEADROOM:g}"
            f" against {pt.input_tpm_per_unit:,} / {pt.output_tpm_per_unit:,} per unit ({pt.source})",
            "billed every hour provisioned, used or not; served in-Region (cross-Region profiles do not use"
            " Provisioned Throughput); latency taken as the Standard tier's (assumed)",
        ],
    )
    if not meets:
        return arch, _refused(
            arch.id,
            RejectedKind.slo,
            "misses an SLO with the Standard tier's latency profile (assumed for Provisioned Throughput)",
        )
    if on_demand is not None and monthly >= on_demand.cost.usd_per_month:
        return arch, _refused(
            arch.id,
            RejectedKind.slo,
            f"Provisioned Throughput ${monthly:,.0f}/month is not cheaper than on-demand"
            f" ${on_demand.cost.usd_per_month:,.0f}/month for this workload",
        )
    return arch, None


def _bedrock_reserved(
    wm: WorkloadModel, choice: BedrockChoice, modes: Modes, on_demand: Architecture | None
) -> Offered:
    """The Reserved tier when a price per 1K tokens-per-minute is known (AWS quotes it; none is published)."""
    res = modes.bedrock_service_tiers.reserved
    if res.usd_per_1k_tpm_month is None or on_demand is None:
        return None, None
    in_tpm, out_tpm = peak_tokens_per_minute(wm)
    monthly, r_in, r_out = reserved_tier_bill(
        in_tpm, out_tpm, res.usd_per_1k_tpm_month, res.min_input_tpm, res.min_output_tpm
    )
    cost = on_demand.cost.model_dump(mode="json")
    cost.update(
        usd_per_month=round(monthly, 2),
        usd_per_hour_peak=round(monthly / HOURS_PER_MONTH, 2),
        breakdown={
            "reserved_input_tokens_per_minute": r_in,
            "reserved_output_tokens_per_minute": r_out,
            "usd_per_1k_tpm_month": res.usd_per_1k_tpm_month,
            "terms_months": res.terms_months,
        },
        price={"source": res.source, "as_of": str(res.as_of), "region": choice.region, "tier": "reserved"},
    )
    users = wm.spec.users.total if wm.spec.users else None
    cost["usd_per_user_month"] = round(monthly / users, 4) if users else None
    out_month = wm.requests_per_month * wm.output_tokens.mean
    cost["usd_per_million_output_tokens"] = round(monthly / (out_month / 1e6), 4) if out_month else None
    arch = on_demand.model_copy(
        update={
            "id": f"bedrock:{choice.invoke_id}:reserved",
            "cost": Cost.model_validate(cost),
            "service_tier": "reserved",
            "bedrock": on_demand.bedrock.model_copy(update={"tier": "reserved", "mode": "reserved"})
            if on_demand.bedrock is not None
            else None,
            "quota": None,
            "notes": [
                f"Reserved tier: ({r_in:,} input + {r_out:,} output tokens/min) / 1,000 x"
                f" ${res.usd_per_1k_tpm_month:g} = ${monthly:,.0f}/month, {' or '.join(map(str, res.terms_months))}"
                f"-month term; traffic above the reservation is served at Standard ({res.source})",
                *on_demand.notes[1:],
            ],
        }
    )
    if monthly >= on_demand.cost.usd_per_month:
        return arch, _refused(
            arch.id,
            RejectedKind.slo,
            f"Reserved tier ${monthly:,.0f}/month is not cheaper than on-demand for this workload",
        )
    return arch, None


def _bedrock_batch(wm: WorkloadModel, choice: BedrockChoice) -> Offered:
    """Bedrock batch inference for a batch workload: a day's requests as one job at batch prices."""
    offer = choice.offer
    rid = f"bedrock:{choice.invoke_id}:batch"
    prices = choice.batch_prices
    if prices is None:
        return None, _refused(
            rid, RejectedKind.unsupported, f"{offer.name} has no batch inference on Bedrock"
        )
    deadline = batch_deadline_h(wm)
    if deadline < BEDROCK_BATCH_WINDOW_H:
        return None, _refused(
            rid,
            RejectedKind.slo,
            f"Bedrock batch jobs complete within {BEDROCK_BATCH_WINDOW_H:g} h, not guaranteed within the e2e SLO"
            f" of {deadline:g} h",
        )
    users = wm.spec.users.total if wm.spec.users else None
    cost, job = bedrock_batch_bill(wm, prices.input_usd_per_1m_tokens, prices.output_usd_per_1m_tokens, users)
    cost["price"] = {
        "source": prices.source,
        "as_of": str(prices.as_of),
        "assumed": prices.assumed,
        "region": choice.region,
    }
    window = {
        "p50": BEDROCK_BATCH_WINDOW_H * 3600,
        "p95": BEDROCK_BATCH_WINDOW_H * 3600,
        "p99": BEDROCK_BATCH_WINDOW_H * 3600,
    }
    arch = _bedrock_row(
        wm,
        id=rid,
        invocation="batch",
        # a batch request's latency is its job's: the completion window bounds every percentile
        predicted={"ttft_ms": {}, "tpot_ms": {}, "e2e_s": window},
        meets_slo=True,
        cost=cost,
        bedrock={
            "model_id": choice.invoke_id,
            "base_model_id": offer.bedrock_model_id,
            "mode": "batch",
            "scope": choice.scope,
            "region": choice.region,
            "quota": offer.quota.model_dump(mode="json"),
        },
        batch=job,
        region=choice.region,
        notes=[
            f"Bedrock batch inference: {job['requests']:,} requests a day as one job, ${job['usd_per_job']:,.2f}"
            f" per job (${job['usd_per_million_tokens']:.4f} per 1M tokens), done within"
            f" {BEDROCK_BATCH_WINDOW_H:g} h (AWS's completion window; deadline {deadline:g} h)",
            f"batch prices from {choice.region}: ${prices.input_usd_per_1m_tokens:g} in /"
            f" ${prices.output_usd_per_1m_tokens:g} out per 1M tokens, as of {prices.as_of}"
            + (" (assumed)" if prices.assumed else "")
            + f": {prices.source}",
            _scope_note(choice),
            "batch jobs have their own quotas (records per job, jobs in progress), not the on-demand"
            " tokens-per-minute quota",
        ],
    )
    return arch, None
