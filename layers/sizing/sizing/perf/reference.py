"""Reference measurements -> normalised calibration rows.

The published rows (public vendor tables and benchmarks, each row naming its source URL) are free text: "2x H100 80GB", "8 per replica x 3
replicas", "550 (Llama-2-tokenizer count)", "constant rate 2.46 req/sec". `parse_rows` reads them with a small
parser plus an explicit annotations table (`data/reference_annotations.yaml`) for rows it cannot or must not
read, and says for every dropped row why. The normalised rows (`sizing.perf.calrows.CalRow`) are kept as
`data/measurements-normalised.csv` (with the original row ids); this product's own load-test results use the same
`CalRow` format and join with `add_rows` (`sizing.perf.calrows`).
"""

from __future__ import annotations

import csv
import functools
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import yaml

from sizing.base.vocabulary import Engine
from sizing.perf.calrows import DATA, CalRow

ANNOTATIONS = DATA / "reference_annotations.yaml"
EXCLUDED = DATA / "measurements-excluded.csv"
REFERENCE_MODELS = DATA / "reference_models.yaml"
#: The published measurements the shipped profile is fitted on: one row per result, each naming its public source
#: (vendor tables, CI dashboards, serving benchmarks; `source` column), kept in the package so a calibration, its
#: staleness checks and the accuracy tables run from any checkout or install.
DEFAULT_REFERENCE = DATA / "measurements-train.csv"

#: Row weight by quality tier (A/A- vendor tables with full configs, B CI or tutorials,
#: C sanity checks): a C row counts 0.4 of an A row in the fit.
QUALITY_WEIGHT = {"A": 1.0, "A-": 0.9, "B+": 0.8, "B": 0.7, "B-": 0.6, "C+": 0.5, "C": 0.4, "C-": 0.3}
#: ShareGPT prompts without a stated mean: 220 in / 200 out, the means of the ShareGPT rows in the same file
#: (X071 232.6/220.6, M187-M189 215-231 in, 194-198 out).
SHAREGPT_IN, SHAREGPT_OUT = 220.0, 200.0
#: ShareGPT lengths are right-skewed; a lognormal sigma of 0.9 (assumed) matches p99/p50 ~ 8 of the AccelMark
#: description (input p50 ~280, p99 2100).
SHAREGPT_SIGMA = 0.9
#: Llama-2 tokenizer counts -> Llama-3 tokens: the 128k-vocabulary tokenizer needs ~15% fewer tokens for English
#: (Meta's Llama-3 announcement); assumed for the llmperf rows counted with the Llama-2 tokenizer.
LLAMA2_TO_LLAMA3_TOKENS = 0.85
#: Load clients that start every user at once: genai-perf's concurrency mode, and vLLM's serving benchmark at an
#: infinite request rate behind `max-concurrency` (all requests are issued at t=0 and a semaphore lets N through)
LOCKSTEP_CLIENT = re.compile(
    r"genai-perf|max-concurrency=\d+.*request-rate inf|max-concurrency=\d+ \(vllm bench", re.I
)
#: llmperf's 2024 loop (ray-project/llmperf `token_benchmark_ray.py` with `RequestsLauncher.get_next_ready`) sends a
#: wave of N requests, then blocks until every one has ended before it sends the next wave
WAVE_CLIENT = re.compile(r"\(llmperf\)", re.I)
#: Seconds between the requests of one llmperf wave (the loop samples a prompt and submits to a ray actor per
#: request): over philschmid's llmperf runs at 2-16 users (X002-X025), the wave period (users / requests per
#: second) minus the mean request time, per request launched after the first, is 0.13-0.18 s in 11 of 13 runs
#: (median 0.16; 0.15 taken). Derived from those rows, a property of the client machine; at 32-64 users it grows
#: to 0.2-0.4 s as the client itself saturates, which is not modelled.
LLMPERF_LAUNCH_GAP_S = 0.15
#: Trainium2 runs at logical NeuronCore config 2 by default: one logical core = 2 physical NeuronCore-v3
#: [docs/serving-facts.md s3, LNC=2 default]; the catalog's device on trn2 is a logical core at LNC=2, the unit the
#: reference rows state TP in.
TRN2_LNC = 2
#: Requests an "offline"/"all at once" run submits when the row does not say (vLLM benchmark defaults: 1000).
OFFLINE_REQUESTS = 1000
#: guidellm "throughput mode" caps concurrency at this (rows M045-M083 say "guidellm max concurrency 128").
GUIDELLM_MAX_CONCURRENCY = 128


#: Builds of an engine that measure differently from the build the product deploys, so they are calibrated as
#: their own profile under the same family prior (never used for the product's predictions):
#: - Neuron `transformers-neuronx`: static batching compiled into one graph, no serving scheduler in the loop
#:   (the AWS SDK tables and FMBench's Triton rows); steps run ~3x faster than vLLM on Neuron for the same model
#:   (M003 6.4 ms vs M069 26.6 ms TPOT for Llama-3.1-8B on inf2).
#: - Neuron `tgi`: TGI's Neuron backend (optimum-neuron), padding-based batching, an older server.
#: - vLLM `v0`: releases before 0.8 (the V0 engine: 2024 and earlier, or DJL LMI images of that time). V1 (the
#:   default from 0.8, 2025) removed most of the CPU work between steps, "up to 1.7x throughput vs V0"
#:   (docs/serving-facts.md s2); the V1 rows show it (Qwen2.5-0.5B on L4 at 5 ms per token, X056; Qwen3-8B on H100,
#:   X071). A row with no version stated counts as the current build.
#: - TGI `v2`: releases before 3.0 (December 2024, which made chunked prefill the default): prompts prefill in steps
#:   of their own, and the router holds new prompts back while a batch decodes (`engines.build_scheduler`).
#: The product deploys vLLM on Neuron (vllm-neuron / optimum-neuron) and the current vLLM, the unnamed builds.
#: Each pattern is searched in the reference's engine and engine-version columns together.
ENGINE_BUILDS: list[tuple[str, str, str]] = [
    ("neuron", r"transformers-neuronx", "transformers-neuronx"),
    ("neuron", r"\btgi\b", "tgi"),
    ("vllm", r"\bv?0\.[0-7]\.\d|\bCI build\b|\b202[34]\b|djl-inference", "v0"),
    ("tgi", r"(?<![\d.])[12]\.(?:\d+|x)\b|\b202[34]\b", "v2"),
]


# --- field parsers ------------------------------------------------------------------------------------------
_ENGINES: list[tuple[str, Engine | None]] = [
    (r"qserve", None),
    (r"neuron|nxd", "neuron"),
    (r"tensorrt|trtllm|\bnim\b", "trtllm"),
    (r"sglang", "sglang"),
    (r"\btgi\b", "tgi"),
    (r"djl lmi", "vllm"),  # lmi-dist rolling batch is vLLM-derived (assumed equivalent)
    (r"vllm", "vllm"),
]
_ACCELERATORS = [
    (r"trn2", "trainium2"),
    (r"trn1", "trainium"),
    (r"inf2|inferentia", "inferentia2"),
    (r"b200", "b200"),
    (r"h200", "h200"),
    (r"h100|p5\.48", "h100"),
    (r"a100-pcie", "a100-80gb-pcie"),
    (r"a100-sxm4-40gb|a100-40gb|p4d", "a100-40gb"),
    (r"a100", "a100-80gb"),  # variant not stated: the SXM 80GB part (most common in published runs), assumed
    (r"l40s", "l40s"),
    (r"\bl4\b|g6\.", "l4"),
    (r"a10g|\bg5\.|\ba10\b", "a10g"),
    (r"\bt4\b|g4dn", "t4"),
]
_MODELS = [
    (r"llama-2-70b", "meta-llama/Llama-2-70b-hf"),
    (r"llama-2-13b", "meta-llama/Llama-2-13b-hf"),
    (r"llama-2-7b", "meta-llama/Llama-2-7b-hf"),
    (r"405b", "meta-llama/Llama-3.1-405B"),
    (r"llama-3\.?[13]?-70b|llama-3-70b|distill-llama-70b|supernova", "meta-llama/Llama-3.1-70B"),
    (r"llama-4-scout", "meta-llama/Llama-4-Scout-17B-16E-Instruct"),
    (r"llama-4-maverick", "meta-llama/Llama-4-Maverick-17B-128E-Instruct"),
    (r"llama-3\.?1?-8b|llama-3-8b|llama-spark", "meta-llama/Llama-3.1-8B"),
    (r"qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B"),
    (r"qwen3-235b", "Qwen/Qwen3-235B-A22B"),
    (r"qwen3-32b", "Qwen/Qwen3-32B"),
    (r"qwen3-14b", "Qwen/Qwen3-14B"),
    (r"qwen3-8b", "Qwen/Qwen3-8B"),
    (r"qwen3-1\.7b", "Qwen/Qwen3-1.7B"),
    (r"qwen2\.5-0\.5b", "Qwen/Qwen2.5-0.5B-Instruct"),
    (r"qwen2\.?5?-72b|arcee-meraj", "Qwen/Qwen2.5-72B-Instruct"),
    (r"qwen2\.?5?-7b|arcee-agent", "Qwen/Qwen2.5-7B-Instruct"),
    (r"mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1"),
    (r"mistral-7b", "mistralai/Mistral-7B-v0.3"),
    (r"yi-1\.5-34b", "01-ai/Yi-1.5-34B-Chat"),
]


def _first(patterns: Iterable[tuple[str, Any]], text: str) -> tuple[bool, Any]:
    low = text.lower()
    for pat, value in patterns:
        if re.search(pat, low):
            return True, value
    return False, None


def _num(text: str) -> float | None:
    m = re.search(r"(\d+(?:\.\d+)?)", text.replace(",", ""))
    return float(m.group(1)) if m else None


def _quant(text: str) -> str | None:
    low = text.lower()
    if "nvfp4" in low or "w4a8" in low:
        return None
    if "fp8" in low:
        return "fp8"
    if "int4" in low or "4-bit" in low or "awq" in low or "gptq" in low:
        return "int4"
    if "weight storage int8" in low:
        return "int8"
    if "not stated on summary" in low:
        return "fp8"
    return "bf16"


def _tokens(text: str, default: float) -> tuple[float | None, bool]:
    """(mean tokens, sharegpt?) from a free-text token column."""
    low = text.lower()
    sharegpt = "sharegpt" in low
    for pat in (r"client-counted mean", r"mean[^\d]*(\d+(?:\.\d+)?)", r"p50 ~(\d+)"):
        if pat == r"client-counted mean":
            m = re.match(r"\s*(\d+) max_tokens", low)
            if m:  # llmperf: the model generated max_tokens of its own tokens
                return float(m.group(1)), False
            continue
        m = re.search(pat, low)
        if m:
            return float(m.group(1)), sharegpt or "p50" in pat
    m = re.match(r"\s*(\d+(?:\.\d+)?)", low)
    if m:
        return float(m.group(1)), sharegpt
    m = re.search(r"max_new_tokens (\d+)", low)
    if m:
        return float(m.group(1)), False
    if sharegpt:
        return default, True
    return None, False


def _tp(text: str) -> tuple[int | None, int]:
    low = text.lower()
    tp = _num(low)
    replicas = 1
    m = re.search(r"x\s*(\d+) replicas|(\d+) model copies|x(\d+) data-parallel|x(\d+) replicas|dp(\d+)", low)
    if m:
        replicas = int(next(g for g in m.groups() if g))
    if "x pp" in low or tp is None:
        return None, replicas
    return int(tp), replicas


def _load(text: str, input_col: str) -> tuple[str | None, float, bool]:
    low = text.lower()
    if "mlperf" in low or "not published" in low:
        return None, 0, False
    if (
        "offline" in low
        or "request rate inf" in low
        or "request-rate inf, no max" in low
        or "all 1000" in low
    ):
        n = _num(input_col.split("prompts")[0]) if "prompts" in input_col else None
        m = re.search(r"all (\d+)", low)
        total = float(m.group(1)) if m else (n if n and n >= 50 else OFFLINE_REQUESTS)
        return "offline", total, True
    if "throughput mode" in low:
        return "throughput-mode", GUIDELLM_MAX_CONCURRENCY, True
    m = re.search(r"static batch=(\d+)|^batch=(\d+)", low)
    if m:
        b = float(next(g for g in m.groups() if g))
        return ("closed", 1.0, False) if b == 1 else ("batch", b, False)
    m = re.search(r"(?:constant rate|request rate|poisson request rate|poisson)\s*([\d.]+)", low)
    if m:
        return "open", float(m.group(1)), False
    m = re.search(
        r"max-concurrency=(\d+)|concurrency=(\d+)|(\d+) concurrent users|(\d+) constant virtual users", low
    )
    if m:
        return "closed", float(next(g for g in m.groups() if g)), False
    if "synchronous" in low or "serial" in low or low.startswith("1 (assumed"):
        return "closed", 1.0, False
    return None, 0, False


def _notes_overrides(notes: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    pats = {
        "max_num_seqs": r"(?:max_batch_size|max-num-seqs|max_num_seqs|batch_size|rolling batch)[= ]+(\d+)",
        "max_model_len": r"(?:sequence_length|max-model-len|max_total_tokens|sequence length \(max positions\))[= ]+(\d+)",
        "gpu_memory_utilization": r"(?:gpu-memory-utilization|gpu_memory_utilization)[= ]+(0\.\d+)",
    }
    low = notes.lower()
    for key, pat in pats.items():
        m = re.search(pat, low)
        if m:
            out[key] = float(m.group(1)) if key == "gpu_memory_utilization" else int(m.group(1))
    return out


def study_of(source: str) -> str:
    """The study a source belongs to: a GitHub repository, or a web host + first path segment."""
    s = source.strip()
    if s.startswith("http"):
        m = re.match(r"https?://([^/]+)/([^/ ]+)", s)
        return f"{m.group(1)}/{m.group(2)}" if m else s
    m = re.match(r"([\w.-]+/[\w.-]+):", s)
    if m:
        return m.group(1)
    return s.split(" ")[0]


def _f(text: str) -> float | None:
    t = (text or "").strip()
    if not t:
        return None
    try:
        return float(t.replace(",", ""))
    except ValueError:
        return None


def _identity(r: dict[str, str]) -> tuple[str, str, str, str, int, int] | str:
    """Engine, accelerator, model, weight format, TP and replicas of a row, or why it cannot be modelled."""
    found, engine = _first(_ENGINES, r["engine"])
    if not found or engine is None:
        return f"engine '{r['engine']}' is not modelled"
    found, acc = _first(_ACCELERATORS, r["hardware"])
    if not found:
        return f"accelerator of '{r['hardware']}' not recognised"
    found, model = _first(_MODELS, r["model"])
    if not found:
        return f"model '{r['model']}' has no architecture in the catalog"
    quant = _quant(r["dtype_quantization"])
    if quant is None:
        return f"quantization '{r['dtype_quantization']}' is not modelled"
    tp, replicas = _tp(r["tensor_parallel"])
    if tp is None:
        return f"tensor parallel '{r['tensor_parallel']}' not usable (unstated or pipeline parallel)"
    return engine, acc, model, quant, tp, replicas


def _shape(r: dict[str, str], ann: dict[str, Any], model: str) -> tuple[float, float, bool] | str:
    """Mean prompt and output tokens (in the model's tokens) and whether they are ShareGPT-shaped."""
    inp, sg_in = _tokens(r["input_tokens"], SHAREGPT_IN)
    outp, sg_out = _tokens(r["output_tokens"], SHAREGPT_OUT)
    inp = ann.pop("input_tokens", inp)
    outp = ann.pop("output_tokens", outp)
    if inp is None or outp is None:
        return "input/output token counts not published"
    if "llama-2-tokenizer" in r["input_tokens"].lower() and model.startswith("meta-llama/Llama-3"):
        inp *= LLAMA2_TO_LLAMA3_TOKENS
    return inp, outp, bool(sg_in or sg_out)


def _figures(r: dict[str, str], drop_ttft: bool) -> dict[str, Any] | str:
    """The published figures of a row (TTFT with the statistic it is), or why there are none."""
    ttft = _f(r["ttft_ms_mean"])
    stat: Literal["mean", "p50"] = "mean"
    if ttft is None:
        ttft = _f(r["ttft_ms_p50"])
        stat = "p50"
    if drop_ttft:
        ttft = None
    out = {
        "ttft_ms": ttft,
        "ttft_stat": stat,
        "tpot_ms": _f(r["tpot_ms_mean_or_itl"]) or _f(r["tpot_ms_p50"]),
        "e2e_s": _f(r["e2e_s_mean"]) or _f(r["e2e_s_p50"]),
        "output_tokens_per_s": _f(r["output_tokens_per_s_total"]),
        "requests_per_s": _f(r["requests_per_s"]),
    }
    if all(out[k] is None for k in ("ttft_ms", "tpot_ms", "e2e_s", "output_tokens_per_s", "requests_per_s")):
        return "no metric published"
    return out


def _per_replica(figures: dict[str, Any], load: str, value: float, replicas: int) -> float:
    """Rates per replica, and the load one replica saw: a load balancer spreads the load over the replicas;
    fewer users than replicas keep only some busy."""
    closed = load in ("closed", "batch", "saturate")
    active = min(replicas, value) if closed else replicas
    for key in ("output_tokens_per_s", "requests_per_s"):
        if figures[key] is not None:
            figures[key] /= active
    if replicas > 1:
        value = max(1.0, round(value / replicas)) if closed else value / replicas
    return value


def _client_and_build(
    r: dict[str, str], fields: dict[str, Any], engine: str, load: str, value: float
) -> None:
    """How the client started and counted, settings the notes state, and the engine build."""
    if LOCKSTEP_CLIENT.search(r["concurrency_or_request_rate"]):
        fields["start"] = "together"
    elif WAVE_CLIENT.search(r["concurrency_or_request_rate"]):
        fields["start"] = "waves"
    client = re.search(r"client-counted mean (\d+(?:\.\d+)?)", r["output_tokens"], re.I)
    if client:  # llmperf: TPOT = e2e / client-counted tokens, throughput in client tokens per second
        fields.update(client_output_tokens=float(client.group(1)), tpot_stat="e2e_per_token")
    fields.update(_notes_overrides(r.get("notes", "")))
    if load == "batch" and engine == "neuron":
        fields["max_num_seqs"] = int(value)
    fields["engine_version"] = (r.get("engine_version_if_known") or "").strip()
    named = f"{r['engine']} {fields['engine_version']}"
    fields["build"] = next(
        (b for eng, pattern, b in ENGINE_BUILDS if eng == engine and re.search(pattern, named, re.I)),
        "",
    )


def parse_row(r: dict[str, str], annotation: dict[str, Any] | None = None) -> CalRow | str:
    """A normalised row, or the reason the row is excluded."""
    ann = dict(annotation or {})
    if "exclude" in ann:
        return str(ann["exclude"])
    ident = _identity(r)
    if isinstance(ident, str):
        return ident
    engine, acc, model, quant, tp, replicas = ident
    shape = _shape(r, ann, model)
    if isinstance(shape, str):
        return shape
    inp, outp, sharegpt = shape
    load, value, sat = _load(r["concurrency_or_request_rate"], r["input_tokens"])
    if load is None:
        return f"load '{r['concurrency_or_request_rate']}' not usable"
    drop_ttft = False
    if load == "throughput-mode":
        # guidellm's throughput mode does not report the concurrency it reached: rows with a server batch cap
        # show no queueing at all (M066-M068), others a minute of it (M083). The server is saturated, so the
        # replica runs at its batch limit; TTFT (queueing time) is not comparable and is dropped.
        load, drop_ttft = "saturate", True
    figures = _figures(r, drop_ttft)
    if isinstance(figures, str):
        return figures
    value = _per_replica(figures, load, value, replicas)
    quality = r["quality"].split(" ")[0].strip()
    fields: dict[str, Any] = {
        "row_id": r["row_id"],
        "source": r["source"],
        "study": study_of(r["source"]),
        "engine": engine,
        "accelerator": acc,
        "tp": tp,
        "replicas": replicas,
        "model": model,
        "quantization": quant,
        "input_tokens": round(float(inp), 1),
        "output_tokens": round(float(outp), 1),
        "token_dist": "sharegpt" if sharegpt else "fixed",
        "load": load,
        "load_value": value,
        "saturated": sat,
        **figures,
        "weight": QUALITY_WEIGHT.get(quality, 0.4),
    }
    _client_and_build(r, fields, engine, load, value)
    fields.update(ann)
    return CalRow.model_validate(fields)


@functools.cache
def load_annotations() -> dict[str, dict[str, Any]]:
    data = yaml.safe_load(ANNOTATIONS.read_text()) or {}
    return {str(k): dict(v) for k, v in data.items()}


def parse_rows(path: Path = DEFAULT_REFERENCE) -> tuple[list[CalRow], list[tuple[str, str]]]:
    """Parse the reference CSV: (normalised rows, [(row_id, reason excluded)])."""
    rows: list[CalRow] = []
    excluded: list[tuple[str, str]] = []
    ann = load_annotations()
    with path.open() as fh:
        for r in csv.DictReader(fh):
            res = parse_row(r, ann.get(r["row_id"]))
            if isinstance(res, str):
                excluded.append((r["row_id"], res))
            else:
                rows.append(res)
    return rows, excluded
