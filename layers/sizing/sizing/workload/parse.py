"""A spec from a file or a mapping: the presets' defaults merged under the spec's own values, the errors
named by field in the user's words (never a pydantic type name), numbers kept within what the store holds, and
token-length samples read from a file."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from sizing.base.distributions import TokenDistribution
from sizing.base.errors import InvalidInput, NotFound, Problem, problems_from_pydantic
from sizing.workload.spec import (
    BATCH_DEADLINE_S,
    LARGEST_STORED_NUMBER,
    SMALLEST_STORED_NUMBER,
    USERS_OR_RATE,
    TokenSpec,
    WorkloadSpec,
)

# --- presets -----------------------------------------------------------------------------------------------
#: Defaults per use case; a spec's own values always win. Each says where its numbers come from.
PRESETS: dict[str, dict[str, Any]] = {
    "chat": {
        "reason": "interactive assistant: short prompts with history, medium answers; first token within about a"
        " second feels responsive, 50-60 ms/token is faster than reading speed (the README's example workload)",
        "spec": {
            "users": {"peak_active_fraction": 0.10, "requests_per_active_hour": 30},
            "traffic": {"profile": "business-hours"},
            "tokens": {"input": {"mean": 1200, "p95": 3500}, "output": {"mean": 250, "p95": 700}},
            "slo": {"ttft_ms": {"p95": 1000}, "tpot_ms": {"p95": 60}, "e2e_s": {"p95": 15}},
        },
    },
    "rag": {
        "reason": "retrieval-augmented answers: several retrieved passages (~4-8 chunks of 512 tokens) make long"
        " inputs and short answers; TTFT dominates",
        "spec": {
            "users": {"peak_active_fraction": 0.10, "requests_per_active_hour": 20},
            "traffic": {"profile": "business-hours"},
            "tokens": {"input": {"mean": 4000, "p95": 8000}, "output": {"mean": 300, "p95": 800}},
            "slo": {"ttft_ms": {"p95": 2000}, "tpot_ms": {"p95": 60}},
        },
    },
    "summarization": {
        "reason": "documents in, a page out; users wait for the whole answer, so e2e matters more than TTFT",
        "spec": {
            "users": {"peak_active_fraction": 0.05, "requests_per_active_hour": 6},
            "traffic": {"profile": "business-hours"},
            "tokens": {"input": {"mean": 6000, "p95": 12000}, "output": {"mean": 500, "p95": 1000}},
            "slo": {"e2e_s": {"p95": 60}},
        },
    },
    "code-completion": {
        "reason": "inline completions fire on every pause in typing: a few hundred ms to first token or the"
        " suggestion arrives too late; outputs are short",
        "spec": {
            "users": {"peak_active_fraction": 0.30, "requests_per_active_hour": 120},
            "traffic": {"profile": "business-hours"},
            "tokens": {"input": {"mean": 1500, "p95": 4000}, "output": {"mean": 60, "p95": 200}},
            "slo": {"ttft_ms": {"p95": 300}, "e2e_s": {"p95": 2.0}},
        },
    },
    "batch": {
        "reason": "offline jobs: throughput and cost matter, latency barely; the day's requests finish within a"
        " day (slo.deadline_s, set when absent; a stated per-request target still binds), and on a real-time"
        " endpoint no request waits more than five minutes",
        "spec": {
            "traffic": {"profile": "flat"},
            "tokens": {"input": {"mean": 2000, "p95": 6000}, "output": {"mean": 400, "p95": 1200}},
            "slo": {"deadline_s": BATCH_DEADLINE_S},
            "constraints": {"min_replicas": 1},
        },
    },
}


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and k not in ("input", "output"):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def _apply_preset(raw: dict[str, Any]) -> dict[str, Any]:
    name = raw.get("preset")
    if not isinstance(name, str) or name not in PRESETS:
        return raw
    base = dict(PRESETS[name]["spec"])
    if "rate" in raw:
        base.pop("users", None)
    elif isinstance(raw.get("users"), dict):
        base["users"] = {**base.get("users", {}), **raw["users"]}
    elif "users" not in raw:
        base.pop("users", None)
    tokens = raw.get("tokens")
    if (isinstance(tokens, dict) and "samples_file" in tokens) or raw.get("trace"):
        base.pop("tokens", None)
    if raw.get("trace") and "users" not in raw:
        base.pop("users", None)  # the trace's busiest hour is the peak
    if "slo" in raw:
        base.pop("slo", None)
    merged = _deep_merge(base, raw)
    slo = merged.get("slo")
    if name == "batch" and isinstance(slo, dict) and slo.get("deadline_s") is None:
        # a batch job's deadline is its own field: the preset sets the day beside the spec's own targets
        merged["slo"] = {**slo, "deadline_s": BATCH_DEADLINE_S}
    return merged


def parse_spec(raw: Any, *, prefix: str = "", catalog: Any = None) -> WorkloadSpec:
    """Validate a spec given as a mapping. Raises InvalidInput with every problem at once, one per field, in the
    user's words (unknown fields with a did-you-mean). When the spec has problems, an unknown `model` is
    reported among them (against `catalog`, the shipped one by default) rather than only once the rest is
    fixed; a spec whose only problem is its model passes here and is refused by the catalog lookup after."""
    if not isinstance(raw, dict):
        raise InvalidInput(
            "a workload spec must be a mapping (YAML or JSON object)", [Problem(prefix, "not a mapping")]
        )
    merged = _apply_preset(raw)
    try:
        spec = WorkloadSpec.model_validate(merged)
    except ValidationError as exc:
        problems = problems_from_pydantic(exc, prefix, model=WorkloadSpec, quote=True)
    else:
        unstorable = _unstorable(spec.model_dump(mode="json", exclude_none=True), prefix)
        if not unstorable:
            return spec
        raise InvalidInput(_summary(unstorable), unstorable)
    # what WorkloadSpec's own validator says only once every field is valid: say it with the rest
    neither = merged.get("users") is None and merged.get("rate") is None and not merged.get("trace")
    both = merged.get("users") is not None and merged.get("rate") is not None
    if (neither or both) and not any(p.message == USERS_OR_RATE for p in problems):
        problems.append(Problem(_join(prefix, "users"), USERS_OR_RATE))
    # tokens may be left out only with a trace: without one, say so with the rest (WorkloadSpec's validator says it
    # only once every field is valid)
    tokens_field = _join(prefix, "tokens")
    if (
        "tokens" not in merged
        and not merged.get("trace")
        and not any(p.field == tokens_field for p in problems)
    ):
        at = next((i for i, p in enumerate(problems) if p.field == _join(prefix, "slo")), len(problems))
        problems.insert(at, Problem(tokens_field, "required, and missing"))
    for p in problems:
        if p.field == prefix and p.message == USERS_OR_RATE:
            p.field = _join(prefix, "users")
    model_problem = _model_problem(merged.get("model"), prefix, catalog)
    if model_problem is not None and not any(p.field == model_problem.field for p in problems):
        problems.insert(0, model_problem)
    raise InvalidInput(_summary(problems), problems)


def _unstorable(data: Any, path: str) -> list[Problem]:
    """The numbers of a validated spec outside what a run or a watch can store (`SMALLEST_STORED_NUMBER` to
    `LARGEST_STORED_NUMBER` in magnitude, or 0), each named by its field path."""
    if isinstance(data, dict):
        return [p for k, v in data.items() for p in _unstorable(v, _join(path, str(k)))]
    if isinstance(data, list):
        return [p for i, v in enumerate(data) for p in _unstorable(v, f"{path}[{i}]")]
    number = isinstance(data, int | float) and not isinstance(data, bool)
    if number and data and not SMALLEST_STORED_NUMBER <= abs(data) <= LARGEST_STORED_NUMBER:
        return [
            Problem(
                path,
                f"{data!r} is out of range: use 0 or magnitudes between {SMALLEST_STORED_NUMBER:g} and"
                f" {LARGEST_STORED_NUMBER:g}",
            )
        ]
    return []


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _summary(problems: list[Problem]) -> str:
    n = len(problems)
    return "the workload spec is not valid" + (f" ({n} problems)" if n > 1 else "")


def _model_problem(name: Any, prefix: str, catalog: Any) -> Problem | None:
    """The catalog's refusal of an unknown model name, as a problem of the spec (None when known or not text)."""
    if not isinstance(name, str) or not name:
        return None

    if catalog is None:
        from sizing.catalog import load_catalog

        catalog = load_catalog()
    try:
        catalog.model(name, field_name=_join(prefix, "model"))
    except NotFound as exc:
        return exc.problems[0] if exc.problems else Problem(_join(prefix, "model"), exc.message)
    return None


def load_spec(path: str | Path) -> WorkloadSpec:
    """Read a spec from a YAML or JSON file."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise InvalidInput(f"cannot read {p}: {exc.strerror}", [Problem("file", str(p))]) from None
    except UnicodeDecodeError:
        raise InvalidInput(f"{p} is not UTF-8 text", [Problem("file", "not UTF-8 text")]) from None
    try:
        raw = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"{p} is not valid YAML/JSON: {exc}", [Problem("file", "parse error")]) from None
    except (RecursionError, ValueError):
        # what the parsers raise rather than report: nesting past the recursion limit, an integer past CPython's
        # digit limit (sys.int_info.default_max_str_digits)
        raise InvalidInput(
            f"{p} is nested too deeply or holds a number too long to read", [Problem("file", "parse error")]
        ) from None
    spec = parse_spec(raw)
    if spec.trace and not spec.trace.path.startswith("s3://") and not Path(spec.trace.path).is_absolute():
        resolved_trace = str((p.parent / spec.trace.path).resolve())
        spec = spec.model_copy(update={"trace": spec.trace.model_copy(update={"path": resolved_trace})})
    if spec.tokens.samples_file and not Path(spec.tokens.samples_file).is_absolute():
        resolved = (p.parent / spec.tokens.samples_file).resolve()
        spec = spec.model_copy(
            update={"tokens": spec.tokens.model_copy(update={"samples_file": str(resolved)})}
        )
    return spec


def token_distribution(t: TokenSpec) -> TokenDistribution:
    """The workload model's distribution for a token spec (fixed, mean + p95, or lognormal with sigma)."""
    if t.fixed is not None:
        return TokenDistribution.fixed(t.fixed)
    assert t.mean is not None
    if t.sigma is not None:
        return TokenDistribution.lognormal(t.mean, t.sigma)
    assert t.p95 is not None
    return TokenDistribution.from_mean_p95(t.mean, t.p95)


def read_token_samples(path: str | Path) -> tuple[list[int], list[int]]:
    """Read (input, output) token counts from CSV (header input_tokens,output_tokens) or JSONL."""
    p = Path(path)
    ins: list[int] = []
    outs: list[int] = []
    try:
        with p.open() as fh:
            if p.suffix == ".jsonl":
                rows: Any = (json.loads(line) for line in fh if line.strip())
            else:
                rows = csv.DictReader(fh)
            for i, row in enumerate(rows, start=1):
                try:
                    a, b = int(row["input_tokens"]), int(row["output_tokens"])
                except (KeyError, TypeError, ValueError):
                    raise InvalidInput(
                        f"{p}: row {i} needs integer input_tokens and output_tokens",
                        [Problem("tokens.samples_file", f"row {i} is malformed")],
                    ) from None
                if a < 1 or b < 1:
                    raise InvalidInput(
                        f"{p}: row {i} has a token count below 1",
                        [Problem("tokens.samples_file", f"row {i}: counts must be >= 1")],
                    )
                ins.append(a)
                outs.append(b)
    except OSError as exc:
        raise InvalidInput(
            f"cannot read {p}: {exc.strerror}", [Problem("tokens.samples_file", str(p))]
        ) from None
    except json.JSONDecodeError:
        raise InvalidInput(f"{p} is not JSONL", [Problem("tokens.samples_file", "not JSONL")]) from None
    if not ins:
        raise InvalidInput(f"{p} has no rows", [Problem("tokens.samples_file", "empty")])
    return ins, outs
