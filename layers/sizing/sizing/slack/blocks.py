"""Block Kit messages of the Slack bot, built from `slack_sdk.models` classes (which validate lengths and shapes
when serialized): help, usage replies, the acknowledgement, the estimate (top three architectures with cost and
SLO figures, a "Measure these" button, a report link) and the ranking of a finished run. A run's figures are
labelled by where they came from: "measured" on a real endpoint, "simulated (twin)" on a local twin (our own
model's simulation, never called measured), each beside the prediction at the same load level."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import Field
from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ConfirmObject,
    ContextBlock,
    DividerBlock,
    HeaderBlock,
    LinkButtonElement,
    MarkdownTextObject,
    PlainTextObject,
    SectionBlock,
)

from sizing.answer import AnswerRow, answer_row, answer_rows, region_line
from sizing.base.strict import Strict
from sizing.base.text import ORIGIN_LABELS
from sizing.base.vocabulary import ENDPOINT, TWIN
from sizing.results import Architecture, EstimateResult, Measured, Predicted
from sizing.slack.client import Message
from sizing.slack.grammar import EXAMPLES, PRESET_ALIASES
from sizing.upgrade import upgrade_result
from sizing.workload.parse import PRESETS
from sizing.workload.spec import WorkloadSpec

MEASURE_ACTION_ID = "measure_these"
REPORT_ACTION_ID = "open_report"
#: Architectures shown per message: three fit on one screen and are what "Measure these" measures.
TOP_SHOWN = 3
#: Block Kit limits (api.slack.com/reference/block-kit): header text 150 characters, button value 2,000.
HEADER_MAX = 150
BUTTON_VALUE_MAX = 2000
SECTION_TEXT_MAX = 3000
#: a confirmation dialog's text (api.slack.com/reference/block-kit/composition-objects#confirm)
CONFIRM_TEXT_MAX = 300
#: How much of a person's message a usage reply quotes back (enough to recognise it).
ECHO_MAX = 300
DEPLOYMENT_NAMES = {"eks": "EKS", "sagemaker": "SageMaker", "bedrock": "Bedrock"}
#: Above this an e2e figure is a job's wall time, printed in hours (as the table prints it).
E2E_HOURS_FROM_S = 3600.0
METRIC_NAMES = {"ttft_ms": ("TTFT", "ms"), "tpot_ms": ("TPOT", "ms"), "e2e_s": ("e2e", "s")}


class MeasureAction(Strict):
    """The value carried by the "Measure these" button: the raw spec the estimate was made from and the ids of
    the architectures the message listed, which the run measures exactly (a button posted before ids were
    carried has none: the run then measures the top `top_k` hardware options)."""

    v: int = Field(default=1, ge=1, le=1)
    spec: dict[str, Any]
    top_k: int = Field(default=TOP_SHOWN, ge=1, le=TOP_SHOWN)
    ids: list[str] | None = Field(default=None, min_length=1, max_length=TOP_SHOWN)


def measurable(archs: Sequence[Architecture]) -> list[Architecture]:
    """The listed architectures a run can provision and load-test: all but Bedrock (serverless, per token)."""
    return [a for a in archs if a.deployment != "bedrock" and a.instance_type and a.id]


def escape(text: str) -> str:
    """Slack mrkdwn control characters (&, <, >) in text that came from a person or a catalog."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _md(text: str) -> MarkdownTextObject:
    return MarkdownTextObject(text=clip(text, SECTION_TEXT_MAX))


def _header(text: str) -> HeaderBlock:
    return HeaderBlock(text=PlainTextObject(text=clip(text, HEADER_MAX)))


def _usd(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"${x:,.0f}" if x >= 100 else f"${x:,.2f}"


def _latency(metric: str, value: float | None) -> str:
    if value is None:
        return "n/a"
    if metric == "e2e_s":
        # a job's wall time reads in hours (86400.00 s reads as a typo)
        return f"{value / 3600:.1f} h" if value >= E2E_HOURS_FROM_S else f"{value:.2f} s"
    return f"{value:,.0f} ms" if value >= 10 else f"{value:.1f} ms"


def describe_spec(spec: WorkloadSpec, model_id: str) -> str:
    """One line a person can check: traffic, model, use case, tokens and SLOs."""
    parts: list[str] = []
    if spec.users is not None:
        parts.append(f"{spec.users.total:,} users")
    elif spec.rate is not None:
        parts.append(f"{spec.rate.peak_rps:g} req/s at peak")
    parts.append(f"`{escape(model_id)}`")
    if spec.preset:
        parts.append(spec.preset)
    tok = spec.tokens
    if tok.input is not None and tok.output is not None:
        parts.append(
            f"in {_tokens(tok.input.fixed, tok.input.mean)} / out {_tokens(tok.output.fixed, tok.output.mean)} tokens"
        )
    if spec.slo.deadline_s is not None:
        parts.append(f"deadline {spec.slo.deadline_s / 3600:g} h")
    for metric, pct, limit in spec.slo.stated_targets():
        name, unit = METRIC_NAMES[metric]
        shown = (
            f"{limit:g} s" if unit == "s" else (f"{limit / 1000:g} s" if limit >= 1000 else f"{limit:g} ms")
        )
        parts.append(f"{name} {pct} ≤ {shown}")
    return " · ".join(parts)


def _tokens(fixed: int | None, mean: float | None) -> str:
    if fixed is not None:
        return f"{fixed:,}"
    return f"~{mean:,.0f}" if mean is not None else "?"


def architecture_title(a: Architecture) -> str:
    """`1. EKS · 2× p5.48xlarge · TP8 · fp8 · vllm · on-demand` (Bedrock: the model id, per token)."""
    dep = DEPLOYMENT_NAMES.get(a.deployment, a.deployment)
    rank = "" if a.rank is None else a.rank
    if a.deployment == "bedrock" or not a.instance_type:
        model_id = (a.bedrock.model_id if a.bedrock is not None else None) or a.id
        return f"{rank}. {dep} · `{escape(str(model_id))}` · per token ({a.capacity_type})"
    fleet = a.instances or a.replicas
    count = fleet.peak if fleet is not None else None
    parts = [f"{count}× {a.instance_type}" if count else a.instance_type]
    if a.tensor_parallel:
        parts.append(f"TP{a.tensor_parallel}")
    parts += [str(v) for v in (a.quantization, a.engine, a.capacity_type) if v]
    return f"{rank}. {dep} · " + " · ".join(escape(p) for p in parts)


#: The figures an architecture's section shows: a run's measured (or simulated) ones, else the prediction.
Shown = Predicted | Measured


def _figures(a: Architecture) -> tuple[str, Shown]:
    """The figures to show and their label: a run's (`measured` or `simulated (twin)`), else the prediction."""
    measured = a.measured
    if measured is not None and any(
        p is not None for p in (measured.ttft_ms, measured.tpot_ms, measured.e2e_s)
    ):
        return ORIGIN_LABELS.get(str(measured.origin), ORIGIN_LABELS[ENDPOINT]), measured
    return "predicted", a.predicted


def _is_twin(a: Architecture) -> bool:
    return a.measured is not None and a.measured.origin == TWIN


def architecture_section(
    a: Architecture | dict[str, Any], slo_pcts: dict[str, str], row: AnswerRow | None = None
) -> SectionBlock:
    """One architecture: title and its qualifiers (kind, tier, basis, quotas, availability: its `row`, by default
    of the architecture alone; its JSON is read by `sizing.upgrade`), then cost and latency (at each SLO's
    percentile) as two fields."""
    if not isinstance(a, Architecture):
        a = upgrade_result({"architectures": [a]}, "architecture").architectures[0]
    if row is None:
        row = answer_row(a, EstimateResult(workload={}, architectures=[a]))
    cost = a.cost
    month = f"*{_usd(cost.usd_per_month)}*/month"
    spot = cost.usd_per_month_spot
    if spot is not None and spot < cost.usd_per_month:
        month += f" ({_usd(spot)} with spot)"
    per_m = cost.usd_per_million_output_tokens
    cost_text = month + (f"\n{_usd(per_m)} per million output tokens" if per_m is not None else "")
    how, figures = _figures(a)
    lines = _latency_lines(figures, slo_pcts)
    slo_text = f"_{how}_: " + " · ".join(lines)
    at_level = figures.predicted_at_level if isinstance(figures, Measured) else None
    if at_level is not None:
        predicted = _latency_lines(
            Predicted(ttft_ms=at_level.ttft_ms, tpot_ms=at_level.tpot_ms, e2e_s=at_level.e2e_s), slo_pcts
        )
        if predicted:
            slo_text += "\n_predicted at the same load_: " + " · ".join(predicted)
    verdict = ":white_check_mark: meets the SLOs" if a.meets_slo else ":warning: misses an SLO"
    headroom = a.headroom_pct
    if a.meets_slo and headroom is not None:
        verdict += f" ({headroom:g}% headroom)"
    slo_text += f"\n{verdict}"
    quals = escape(row.qualifier_text())
    return SectionBlock(
        text=_md(f"*{architecture_title(a)}*\n_{quals}_"),
        fields=[_md(f"*Cost*\n{cost_text}"), _md(f"*Latency*\n{slo_text}")],
    )


def _latency_lines(figures: Shown, slo_pcts: dict[str, str]) -> list[str]:
    """`TTFT p95 412 ms`, one per metric the figures have, at each SLO's percentile (p95 when none)."""
    lines = []
    for metric, (name, _) in METRIC_NAMES.items():
        pct = slo_pcts.get(metric, "p95")
        dist = getattr(figures, metric)
        value = getattr(dist, pct, None) if dist is not None else None
        if value is not None:
            lines.append(f"{name} {pct} {_latency(metric, value)}")
    return lines


def _slo_pcts(spec: WorkloadSpec | None) -> dict[str, str]:
    if spec is None:
        return {}
    out: dict[str, str] = {}
    for metric, pct, _ in spec.slo.targets():
        out.setdefault(metric, pct)
    return out


def slo_cost_text(result: EstimateResult) -> str:
    """What each stated SLO target costs, one line each (`TTFT p99 150 ms → 300 ms: $784,350 → $96,033/month`),
    the binding one marked; "" when the result has none."""
    lines = [f"• {escape(c.line)}" + (" _(binds)_" if c.binding else "") for c in result.slo_costs if c.line]
    return "*The cost of each SLO* (each relaxed alone, bound doubled)\n" + "\n".join(lines) if lines else ""


def help_message() -> Message:
    presets = ", ".join(f"`{p}`" for p in PRESETS)
    aliases = ", ".join(f"`{a}`" for a in PRESET_ALIASES if a not in PRESETS)
    grammar = (
        "*Traffic* `10k users` or `12 rps` (`720 rpm`)\n"
        "*Model* a catalog name or Hugging Face id: `llama-3.1-70b`, `meta-llama/Llama-3.1-8B-Instruct`\n"
        f"*Use case* {presets} (also {aliases}); `chat` when not named — it fills in whatever you leave out\n"
        "*SLOs* `ttft<1s` `tpot<50ms` `e2e<2.5s`, p95 unless you say `ttft<1s@p99` (`<`, `<=`, `≤`, `=` all work)\n"
        "*Tokens* `in=1500 out=300` (every request that long) or `in=1200/3500` (mean/p95)\n"
        "*Limits* `eks` `sagemaker` `bedrock`, `spot`, `fp8` `bf16` `int4`, `region=eu-west-1`, `max=$20k` (a monthly cost cap)"
    )
    examples = "\n".join(f"• `/sizing {e}`" for e in EXAMPLES)
    return Message(
        text="How to use /sizing",
        blocks=[
            _header("/sizing — what should we run this LLM workload on?"),
            SectionBlock(text=_md(grammar)),
            SectionBlock(text=_md(f"*Examples*\n{examples}")),
            ContextBlock(
                elements=[
                    _md(
                        "You get the three cheapest architectures that meet your SLOs, estimated in seconds; "
                        "*Measure these* load-tests them on real hardware."
                    )
                ]
            ),
        ],
    )


def usage_message(problems: Sequence[str], *, text: str = "") -> Message:
    """A friendly reply to a message that could not be read: what was wrong, then the grammar in brief."""
    said = f"You wrote: `{escape(clip(text, ECHO_MAX))}`\n" if text else ""
    listed = "\n".join(f"• {p}" for p in problems)
    examples = "\n".join(f"• `/sizing {e}`" for e in EXAMPLES[:3])
    return Message(
        text="I could not size that: " + "; ".join(problems),
        blocks=[
            SectionBlock(text=_md(f"{said}I could not size that yet:\n{listed}")),
            SectionBlock(text=_md(f"*Try for example*\n{examples}")),
            ContextBlock(elements=[_md("`/sizing help` shows everything you can say.")]),
        ],
    )


def working_message(summary: str) -> Message:
    return Message(
        text="Sizing your workload…",
        blocks=[
            SectionBlock(
                text=_md(f":hourglass_flowing_sand: Sizing {summary}\nThe answer follows in a few seconds.")
            ),
        ],
    )


def estimate_message(
    result: EstimateResult | dict[str, Any],
    spec: WorkloadSpec,
    raw_spec: dict[str, Any],
    *,
    user: str | None = None,
    report_url: str | None = None,
) -> Message:
    """The estimate (typed, or its JSON: read by `sizing.upgrade`): top architectures with cost and SLO figures,
    "Measure these", and the report link."""
    result = upgrade_result(result, "estimate")
    rows = answer_rows(result)
    workload = result.workload
    model_id = workload.model or spec.model
    archs = result.architectures[:TOP_SHOWN]
    who = f"<@{escape(user)}> asked: " if user else ""
    blocks: list[Block] = [
        _header(f"Sizing {model_id}"),
        ContextBlock(elements=[_md(who + describe_spec(spec, model_id))]),
    ]
    if workload.peak_rps is not None:
        line = f"Peak {workload.peak_rps:,.1f} req/s"
        # requests in flight (Little's law) describe a real-time answer; a job's would read as thousands
        if rows and rows[0].figures.in_flight is not None:
            line += f", about {workload.peak_concurrency or 0:,.0f} requests in flight"
        if (where := region_line(result)) is not None:
            line += f" · {where}"
        blocks.append(ContextBlock(elements=[_md(escape(line))]))
    if not archs:
        infeasible = (
            result.infeasible.message if result.infeasible is not None else ""
        ) or "no architecture fits"
        if costs := slo_cost_text(result):
            blocks.append(SectionBlock(text=_md(costs)))
        blocks.append(
            SectionBlock(
                text=_md(
                    f":no_entry: Nothing meets these SLOs: {escape(infeasible)}.\nRelax an SLO or change the model."
                )
            )
        )
        return Message(text=f"Nothing meets these SLOs for {model_id}", blocks=blocks)
    blocks.append(DividerBlock())
    pcts = _slo_pcts(spec)
    blocks += [architecture_section(a, pcts, row) for a, row in zip(archs, rows[:TOP_SHOWN], strict=True)]
    costs = slo_cost_text(result)
    if costs:
        blocks.append(SectionBlock(text=_md(costs)))
    blocks.append(DividerBlock())
    actions: list[Any] = []
    to_measure = measurable(archs)
    ids = [a.id for a in to_measure]
    value = json.dumps(
        MeasureAction(spec=raw_spec, top_k=max(1, len(ids)), ids=ids or None).model_dump(mode="json"),
        separators=(",", ":"),
    )
    if ids and len(value) <= BUTTON_VALUE_MAX:
        named = ", ".join(f"{DEPLOYMENT_NAMES.get(a.deployment, a.deployment)} #{a.rank}" for a in to_measure)
        skipped = (
            " Bedrock is serverless and billed per token: it is not provisioned."
            if len(to_measure) < len(archs)
            else ""
        )
        actions.append(
            ButtonElement(
                text=PlainTextObject(text=f"Measure these {len(ids)}"),
                action_id=MEASURE_ACTION_ID,
                value=value,
                style="primary",
                confirm=ConfirmObject(
                    title="Start a measured run?",
                    text=MarkdownTextObject(
                        text=clip(
                            f"This provisions exactly the {len(ids)} listed ({named}) on real hardware and"
                            " load-tests them."
                            + skipped
                            + " It costs money and takes a while; the ranking is"
                            " posted in this thread.",
                            CONFIRM_TEXT_MAX,
                        )
                    ),
                    confirm="Measure",
                    deny="Cancel",
                ),
            )
        )
    if report_url:
        actions.append(
            LinkButtonElement(
                text=PlainTextObject(text="Full report"), url=report_url, action_id=REPORT_ACTION_ID
            )
        )
    if actions:
        blocks.append(ActionsBlock(elements=actions))
    cheapest = archs[0].cost.usd_per_month
    return Message(
        text=f"Sizing {model_id}: cheapest fit {architecture_title(archs[0])} at {_usd(cheapest)}/month",
        blocks=blocks,
    )


def run_started_message(run_id: str, top_k: int, user: str | None, *, listed: bool = False) -> Message:
    """`listed`: the run measures the architectures the estimate message listed (by id), not the top K."""
    who = f"<@{escape(user)}> started" if user else "Started"
    what = f"the {top_k} listed above" if listed else f"the top {top_k}"
    return Message(
        text=f"Measuring run {run_id} started",
        blocks=[
            SectionBlock(
                text=_md(
                    f":stopwatch: {who} a measured run of {what} (run `{escape(run_id)}`). "
                    "The measured ranking will be posted in this thread. To stop it, cancel it on the API:"
                    f" `POST /runs/{escape(run_id)}/cancel`."
                )
            )
        ],
    )


def measured_message(
    run_id: str,
    architectures: Sequence[Architecture | dict[str, Any]],
    spec: WorkloadSpec | None,
    report_url: str | None,
    drift: str | None = None,
) -> Message:
    """The ranking of a finished run, its figures first: "Measured ranking" on real endpoints, "Simulated
    ranking (twin)" when local twins served it. `drift`: the lines saying where a measurement left its
    estimate's stated interval (`sizing.learn.drift.slack_text`), shown under the ranking. `architectures`: typed,
    or the stored ranking's JSON (read by `sizing.upgrade`)."""
    workload = {"model": spec.model} if spec is not None else {}
    ranking = upgrade_result(
        {"workload": workload, "architectures": list(architectures[:TOP_SHOWN])}, "run's ranking"
    )
    shown = ranking.architectures
    twin = any(_is_twin(a) for a in shown)
    title = "Simulated ranking (twin)" if twin else "Measured ranking"
    blocks: list[Block] = [_header(title)]
    if spec is not None:
        blocks.append(ContextBlock(elements=[_md(describe_spec(spec, spec.model))]))
    if not shown:
        blocks.append(SectionBlock(text=_md("The run finished but ranked no architecture.")))
    else:
        blocks.append(DividerBlock())
        pcts = _slo_pcts(spec)
        rows = answer_rows(ranking)
        blocks += [architecture_section(a, pcts, row) for a, row in zip(shown, rows, strict=True)]
    if drift:
        blocks.append(SectionBlock(text=_md(escape(drift))))
    if report_url:
        blocks.append(
            ActionsBlock(
                elements=[
                    LinkButtonElement(
                        text=PlainTextObject(text="Full report"), url=report_url, action_id=REPORT_ACTION_ID
                    )
                ]
            )
        )
    note = (
        " · figures simulated (twin): local twins serve at our own model's pace, so they are not measurements"
        if twin
        else ""
    )
    blocks.append(ContextBlock(elements=[_md(f"run `{escape(run_id)}`{note}")]))
    first = architecture_title(shown[0]) if shown else "nothing ranked"
    done = "simulated (twin)" if twin else "measured"
    return Message(text=f"Run {run_id} {done}: {first}", blocks=blocks)


def run_ended_message(run_id: str, status: str, error: str | None) -> Message:
    """A run that did not succeed: refused by the budget guard, failed or cancelled."""
    icon = {"REFUSED": ":money_with_wings:", "CANCELLED": ":octagonal_sign:"}.get(status, ":x:")
    why = f": {escape(error)}" if error else ""
    return Message(
        text=f"Run {run_id} {status.lower()}",
        blocks=[SectionBlock(text=_md(f"{icon} Run `{escape(run_id)}` {status.lower()}{why}"))],
    )


def notice_message(text: str) -> Message:
    """A one-line reply (an ephemeral notice, an apology)."""
    return Message(text=text, blocks=[SectionBlock(text=_md(escape(text)))])
