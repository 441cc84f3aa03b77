"""Calibration rows in the normalised format (`CalRow`): what one measurement says (who measured what,
on which hardware and engine build, at which load, and its figures), and the CSV files that keep them: the
shipped reference rows, and this product's own load-test rows, added from a sizing run's result."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from sizing.base.errors import InvalidInput, Problem, problems_from_pydantic
from sizing.base.strict import Strict
from sizing.base.vocabulary import Engine
from sizing.perf.calibration import TWIN_ORIGIN

DATA = Path(__file__).parent / "data"


NORMALISED = DATA / "measurements-normalised.csv"
#: This product's own load-test rows, kept beside the profile they calibrate (`sizing calibrate --from-run`)
LOADTEST_ROWS_NAME = "measurements-loadtest.csv"


#: Weight formats a reference row may state: a subset of `sizing.base.vocabulary.Quantization`.
MeasuredQuantization = Literal["bf16", "fp8", "int8", "int4", "fp32"]
#: closed: N users; open: Poisson rate; batch: one static batch; offline: N requests at once; saturate: as many
#: users as the server's batch limit
LoadKind = Literal["closed", "open", "batch", "offline", "saturate"]
LOAD_ALIASES = {"concurrency": "closed", "rate": "open", "request_rate": "open"}


class CalRow(Strict):
    """One normalised measurement: a deployment, a request shape, a load, and what was measured per replica."""

    row_id: str
    source: str
    study: str = Field(description="source key for leave-one-source-out cross-validation")
    engine: Engine
    accelerator: str
    tp: int = Field(ge=1)
    replicas: int = Field(default=1, ge=1)
    model: str
    quantization: MeasuredQuantization
    input_tokens: float = Field(gt=0)
    output_tokens: float = Field(gt=0)
    token_dist: Literal["fixed", "sharegpt"] = "fixed"
    load: LoadKind
    load_value: float = Field(gt=0, description="concurrency, rate (req/s), batch size or requests submitted")
    saturated: bool = False
    max_num_seqs: int | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    #: KV-cache capacity the server reported (tokens), when it did: replaces the memory arithmetic's
    kv_cache_tokens: int | None = Field(default=None, ge=1)
    ttft_ms: float | None = None
    ttft_stat: Literal["mean", "p50"] = "mean"
    tpot_ms: float | None = None
    #: what `tpot_ms` measured: the per-request mean time per output token, the median inter-token latency, or
    #: llmperf's "inter-token latency": the whole request time over the output tokens the client counted
    tpot_stat: Literal["mean", "itl_p50", "e2e_per_token"] = "mean"
    #: output tokens per request as the client counted them, when it counted with another tokenizer than the
    #: model's (llmperf counts with the Llama-2 tokenizer); the row's TPOT and throughput are in these units
    client_output_tokens: float | None = Field(default=None, gt=0)
    #: how a closed loop's users start: spread over a request's duration (where closed loops settle); together
    #: (`LOCKSTEP_CLIENT`: genai-perf's concurrency mode issues every user's request at once, and identical synthetic
    #: prompts with fixed output lengths then keep the users in lock-step waves, each wave's prompts prefilled
    #: together); or in waves that each wait for their last request (`WAVE_CLIENT`: llmperf)
    start: Literal["spread", "together", "waves"] = "spread"
    #: this product's load test of a closed loop whose users fell into lock-step: the users a group held
    #: (`sizing.loadtest.metrics.lockstep_users` of the level's `lockstep_group`), simulated so (`ClosedLoop.group`,
    #: the groups spread over the ramp) rather than every user at once (`start: together` without it)
    lockstep_group: int | None = Field(default=None, ge=2)
    e2e_s: float | None = None
    output_tokens_per_s: float | None = Field(default=None, description="per replica")
    requests_per_s: float | None = Field(default=None, description="per replica")
    weight: float = Field(default=1.0, gt=0)
    #: where the row comes from: `reference` (published), `loadtest` (this product's load test of a real server), or
    #: `twin` (a load test of a local twin, which serves at the estimator's own predicted pace: `calibration.TWIN_ORIGIN`,
    #: never calibrated on)
    origin: str = "reference"
    #: lognormal sigma of the prompt / output lengths drawn around the row's means (this product's load tests draw
    #: from the workload's distribution); None: `token_dist` decides
    input_sigma: float | None = Field(default=None, ge=0)
    output_sigma: float | None = Field(default=None, ge=0)
    build: str = Field(
        default="",
        description="engine build calibrated apart from the engine's product profile (see ENGINE_BUILDS); "
        "empty for the build the product deploys",
    )
    #: this product's own load test of a Poisson level: the warm-up before its window and the window (s) it read the
    #: requests sent in; the row is predicted as those windows read (`simulator.simulate_windows`), not as a steady
    #: state. Of one of its closed loops: the warm-up its users started in (`sizing.base.spawn.ramp_s`), and the
    #: row is simulated with its users started so. None: a published row, or a level recorded before rows kept them
    warmup_s: float | None = Field(default=None, ge=0)
    window_s: float | None = Field(default=None, gt=0)
    #: the engine version as the source states it (release, image tag or date), for settings that changed
    #: within a build (`engines.build_scheduler`)
    engine_version: str = ""

    @field_validator("load", mode="before")
    @classmethod
    def _load_alias(cls, v: Any) -> Any:
        """Load-test rows name the closed loop by its knob ("concurrency") and the open loop by "rate"."""
        return LOAD_ALIASES.get(v, v) if isinstance(v, str) else v


COLUMNS = list(CalRow.model_fields)


def write_rows(rows: list[CalRow], path: Path = NORMALISED) -> None:
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        for row in rows:
            w.writerow({k: ("" if v is None else v) for k, v in row.model_dump().items()})


def read_rows(path: Path = NORMALISED) -> list[CalRow]:
    """Rows in the normalised format (the shipped reference rows, or this product's own load-test rows)."""
    out: list[CalRow] = []
    with path.open() as fh:
        for r in csv.DictReader(fh):
            out.append(CalRow.model_validate({k: v for k, v in r.items() if v != ""}))
    return out


def add_rows(rows: Iterable[CalRow | dict[str, Any]], path: Path) -> int:
    """Append measured rows (e.g. this product's load-test results, `origin: loadtest`) to a normalised CSV that
    `sizing calibrate --extra PATH` fits together with the reference rows. Returns the number written."""
    items = [r if isinstance(r, CalRow) else CalRow.model_validate(r) for r in rows]
    new = not path.exists()
    # append in the file's own column order (a file written before a column was added keeps its header; columns
    # it lacks are left at their defaults when read back)
    columns = COLUMNS
    if not new:
        with path.open() as fh:
            columns = next(csv.reader(fh), COLUMNS) or COLUMNS
    with path.open("a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        if new:
            w.writeheader()
        for row in items:
            w.writerow({k: ("" if v is None else v) for k, v in row.model_dump().items()})
    return len(items)


def rows_from_run(result: dict[str, Any], where: str) -> list[CalRow]:
    """The calibration rows a sizing run measured (`ranking.calibration_rows` of the result `sizing run` writes),
    validated. Refuses, naming `where` and the row, a file that is not a run result, a run that measured nothing, a
    row that is not a calibration row, rows that do not name the run (recorded before rows said what they measured:
    the embedded default's twins among them), and rows measured on local twins (`calibration.TWIN_ORIGIN`): those
    would fit the model to its own predictions. Raises `InvalidInput`; nothing is returned half-read."""

    ranking = result.get("ranking")
    raw = ranking.get("calibration_rows") if isinstance(ranking, dict) else None
    if not isinstance(raw, list):
        raise InvalidInput(
            f"{where} is not a sizing run result (no ranking.calibration_rows)",
            [Problem("ranking.calibration_rows", "missing")],
        )
    if not raw:
        raise InvalidInput(
            f"{where}: the run measured no load level, so it has no calibration rows",
            [Problem("ranking.calibration_rows", "empty")],
        )
    rows: list[CalRow] = []
    for i, item in enumerate(raw):
        try:
            rows.append(CalRow.model_validate(item))
        except ValidationError as exc:
            rid = item.get("row_id", i) if isinstance(item, dict) else i
            raise InvalidInput(
                f"{where}: calibration row {rid} is not a calibration row",
                problems_from_pydantic(exc, f"ranking.calibration_rows[{i}]"),
            ) from None
    run_id = str((result.get("run") or {}).get("run_id") or "")
    unnamed = [r.row_id for r in rows if r.origin != TWIN_ORIGIN and (not run_id or run_id not in r.source)]
    if unnamed:
        raise InvalidInput(
            f"{where}: rows that do not name run {run_id or '(no run id)'} were recorded before load-test rows said"
            " whether they measured a real server or a twin; measure again to import them",
            [
                Problem(f"ranking.calibration_rows[{rid}].source", "does not name the run")
                for rid in unnamed[:3]
            ],
        )
    twins = [r.row_id for r in rows if r.origin == TWIN_ORIGIN]
    if twins:
        raise InvalidInput(
            f"{where}: the run measured local twins, which serve at the estimator's own predicted pace; calibrating"
            " on them would fit the model to itself. Measure real servers (the AWS backend, or SIZING_ENDPOINT)",
            [Problem(f"ranking.calibration_rows[{rid}].origin", TWIN_ORIGIN) for rid in twins[:3]],
        )
    return rows


def merge_new_rows(rows: list[CalRow], path: Path) -> tuple[int, int]:
    """Append to `path` the rows whose ids it does not hold yet (a run imported twice adds nothing).
    Returns (added, already there)."""
    held = {r.row_id for r in read_rows(path)} if path.exists() else set()
    new: list[CalRow] = []
    for r in rows:
        if r.row_id not in held:
            held.add(r.row_id)
            new.append(r)
    if new:
        add_rows(new, path)
    return len(new), len(rows) - len(new)
