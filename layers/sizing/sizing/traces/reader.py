"""Read a request trace, streaming: a local file (plain or gzip) or, deployed, an S3 object or every object under
an S3 prefix (`s3://bucket/key`, `s3://bucket/prefix/`). Each line becomes a `Record` (`sizing.traces.formats`)
and is folded at once into columns of numbers (arrival, prompt and answer tokens, prompt tokens a prefix cache
holds, and how long ago in prompt tokens it last held them), so memory grows with the number of requests (about
50 bytes each) and the prefix tracker's bounded table, never with the size of the lines.

A malformed line is refused naming the file, the line number and the field; a log with several models is refused
naming them unless one is chosen; a trace that cannot be read is refused naming its path or URI.
"""

from __future__ import annotations

import hashlib
import json
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from json.scanner import make_scanner
from typing import IO, Any, Final

import numpy as np

from sizing.base.errors import InvalidInput, Problem
from sizing.traces.formats import FORMATS, Record, TraceFormat, detect
from sizing.traces.lines import WHOLE, one_mooncake, records
from sizing.traces.prefixes import Prefixes, derived_blocks
from sizing.traces.sources import FIELD, bad_line, open_sources, unreadable

__all__ = ["FIELD", "Trace", "bad_line", "read_trace", "unreadable"]

#: Where reuse comes from, by what the trace carries.
REUSE_SOURCES: Final = ("hash_ids", "sessions", "prefix groups", "prompt cache", "none")


@dataclass
class Trace:
    """A trace as the product keeps it: per request (in arrival order) its arrival in seconds since the first,
    its prompt and answer tokens, the prompt tokens a prefix cache already held when it arrived (`hit`: leading
    blocks seen before, at most the prompt less its last token), the prompt tokens sent since those blocks were
    last used (`reuse_distance`: an LRU cache that size or larger still holds them), and its hashed session.
    No text, no id as given."""

    source: str
    format: TraceFormat
    digest: str
    t: np.ndarray
    inp: np.ndarray
    out: np.ndarray
    hit: np.ndarray
    reuse_distance: np.ndarray
    session: np.ndarray
    #: per request, a key of the prefix its hit comes from (its first block; 0: none), so a replay can send
    #: requests that share a prefix the same leading text
    prefix_key: np.ndarray
    #: seconds since the epoch of the first request (None: the trace's times are relative to its start)
    start: float | None = None
    model: str | None = None
    models: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    estimated: int = 0
    reuse_source: str = "none"
    #: prompt blocks in all (hash_ids or derived from sessions and groups) and those seen before anywhere in a
    #: prompt (not only at its start)
    blocks_total: int = 0
    blocks_seen: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return int(self.t.size)

    @property
    def span_s(self) -> float:
        return float(self.t[-1] - self.t[0]) if self.t.size > 1 else 0.0


# --- reading -----------------------------------------------------------------------------------------------------
class _Columns:
    __slots__ = ("absolute", "hit", "inp", "key", "model", "out", "reuse", "session", "t")

    def __init__(self) -> None:
        self.t = array("d")
        self.inp = array("q")
        self.out = array("q")
        self.hit = array("q")
        self.reuse = array("q")
        self.session = array("q")
        self.model = array("H")
        self.key = array("q")
        self.absolute: bool | None = None

    def add(self, rows: list[tuple[float, int, int, int, int, int, int, int]]) -> None:
        """Append a batch of rows (t, inp, out, hit, reuse, session, model, prefix key): one C-level pass per
        column."""
        if not rows:
            return
        t, inp, out, hit, reuse, session, model, key = zip(*rows, strict=True)
        self.t.extend(t)
        self.inp.extend(inp)
        self.out.extend(out)
        self.hit.extend(hit)
        self.reuse.extend(reuse)
        self.session.extend(session)
        self.model.extend(model)
        self.key.extend(key)
        rows.clear()


#: Rows gathered before they go to the columns: a bound on the memory of the batch, not a model figure.
BATCH_ROWS: Final = 65_536


def _first(fh: IO[bytes], digest: Any) -> tuple[int, bytes] | None:
    """The first non-empty line of a file (and its number), hashing what it reads."""
    for lineno, line in enumerate(fh, start=1):
        digest.update(line)
        if line.strip():
            return lineno, line
    return None


def _rest(fh: IO[bytes], digest: Any, after: int) -> Iterator[tuple[int, bytes]]:
    update = digest.update
    for lineno, line in enumerate(fh, start=after + 1):
        update(line)
        if len(line) > 2 or line.strip():
            yield lineno, line


class _Reading:
    """The state of one read: the columns, the models seen, the prefix tracker, what was skipped."""

    def __init__(self, fmt: TraceFormat | None) -> None:
        self.digest = hashlib.sha256()
        self.cols = _Columns()
        self.models: dict[str, int] = {}
        self.skipped: dict[str, int] = {}
        self.prefixes = Prefixes()
        self.group_len: dict[int, int] = {}
        self.estimated = 0
        self.kinds: set[str] = set()
        self.fmt: TraceFormat | None = fmt
        self.pending: list[tuple[float, int, int, int, int, int, int, int]] = []

    def file(self, name: str, fh: IO[bytes]) -> None:
        try:
            first = _first(fh, self.digest)
        except (OSError, EOFError) as exc:
            raise unreadable(name, f"not a readable file ({exc})") from None
        if first is None:
            return
        if self.fmt is None:
            self.fmt = detect(first[1])
            if self.fmt is None:
                raise InvalidInput(
                    f"{name}: cannot tell the trace's format from its first line",
                    [
                        Problem(
                            "format",
                            f"{name} is not a Mooncake, Bedrock invocation log, Data Capture or CSV trace that"
                            " the product recognises: give --format (mooncake, bedrock, datacapture, csv)",
                        )
                    ],
                )
        if self.fmt == "mooncake":
            try:
                self._mooncake(name, first, fh)
            except (OSError, EOFError) as exc:
                raise unreadable(name, f"reading stopped ({exc})") from None
            return
        cols, pending = self.cols, self.pending
        try:
            for lineno, rec, absolute in records(self.fmt, name, first, _rest(fh, self.digest, first[0])):
                if rec is None:
                    self.skipped[absolute] = self.skipped.get(absolute, 0) + 1
                    continue
                if cols.absolute is None:
                    cols.absolute = bool(absolute)
                elif cols.absolute != bool(absolute):
                    raise bad_line(
                        name, lineno, "timestamp", "mixes absolute times with times since the start"
                    )
                hit, dist, key = self._reuse(rec)
                pending.append(
                    (
                        rec.t,
                        rec.inp,
                        rec.out,
                        hit,
                        dist,
                        rec.session,
                        self.models.setdefault(rec.model, len(self.models)),
                        key,
                    )
                )
                if len(pending) >= BATCH_ROWS:
                    cols.add(pending)
                self.estimated += rec.estimated
        except (OSError, EOFError) as exc:
            raise unreadable(name, f"reading stopped ({exc})") from None

    def _mooncake(self, name: str, first: tuple[int, bytes], fh: IO[bytes]) -> None:
        """The Mooncake lines of one file, the common case (a JSON object of whole numbers and a list of ids)
        checked and folded inline -- a million lines in seconds; any other line goes through `formats.mooncake`,
        which names what is wrong with it."""
        cols, pending = self.cols, self.pending
        if cols.absolute:
            raise bad_line(name, first[0], "timestamp", "mixes absolute times with times since the start")
        cols.absolute = False
        scan = make_scanner(json.JSONDecoder())  # type: ignore[arg-type]
        update, visit, append = self.digest.update, self.prefixes.visit, pending.append
        prefixes = self.prefixes
        model = self.models.setdefault("", len(self.models))
        number, ints = (int, float), WHOLE
        lineno = first[0]
        line = first[1]
        lines = iter(fh)
        while True:
            text = line.decode("utf-8", "replace")
            try:
                obj, end = scan(text, 0)
                if end < len(text) - 2 and text[end:].strip():
                    obj = None
            except (StopIteration, ValueError, RecursionError):
                obj = None
            ts = inp = out = ids = None
            if type(obj) is dict:
                ts, inp, out, ids = (
                    obj.get("timestamp"),
                    obj.get("input_length"),
                    obj.get("output_length"),
                    obj.get("hash_ids"),
                )
            if not (
                type(inp) is int
                and inp >= 1
                and type(out) is int
                and out >= 1
                and type(ts) in number
                and ts >= 0  # type: ignore[operator]
                and (ids is None or (type(ids) is list and set(map(type, ids)) <= ints))
            ):
                rec = one_mooncake(name, lineno, text)
                ts, inp, out, ids = rec.t * 1000.0, rec.inp, rec.out, rec.hash_ids
            assert inp is not None
            if ids is not None:
                self.kinds.add("hash_ids")
                hit, dist = visit(ids, inp)
                key = hash((ids[0],)) if ids else 0
            else:
                prefixes.sent += inp
                hit = dist = key = 0
            append((ts / 1000.0, inp, out, hit, dist, 0, model, key))  # type: ignore[operator]
            if len(pending) >= BATCH_ROWS:
                cols.add(pending)
            while True:
                line = next(lines, b"")
                if not line:
                    return
                lineno += 1
                update(line)
                if len(line) > 2 or line.strip():
                    break

    def _reuse(self, rec: Record) -> tuple[int, int, int]:
        """The request's prefix hit, reuse distance and prefix key, from what its record carries."""
        if rec.hash_ids is not None:
            self.kinds.add("hash_ids")
            hit, dist = self.prefixes.visit(rec.hash_ids, rec.inp)
            return hit, dist, hash((rec.hash_ids[0],)) if rec.hash_ids else 0
        if rec.cache_read >= 0:
            self.kinds.add("prompt cache")
            self.prefixes.sent += rec.inp
            return min(rec.cache_read, rec.inp - 1), 0, 0
        if rec.group or rec.session:
            self.kinds.add("sessions" if rec.session else "prefix groups")
            blocks = derived_blocks(rec, self.group_len)
            hit, dist = self.prefixes.visit(blocks, rec.inp)
            return hit, dist, hash(blocks[0]) if blocks else 0
        self.prefixes.sent += rec.inp
        return 0, 0, 0

    def trace(self, source: str) -> tuple[Trace, np.ndarray]:
        """The columns as a Trace (every model's requests), and each request's model index."""
        cols = self.cols
        cols.add(self.pending)
        if self.fmt is None:
            raise unreadable(source, "it holds no requests")
        names = {i: m for m, i in self.models.items()}
        counts = np.bincount(np.frombuffer(cols.model, dtype=np.uint16), minlength=len(names))
        trace = Trace(
            source=source,
            format=self.fmt,
            digest="sha256:" + self.digest.hexdigest(),
            t=np.frombuffer(cols.t, dtype=np.float64),
            inp=np.frombuffer(cols.inp, dtype=np.int64),
            out=np.frombuffer(cols.out, dtype=np.int64),
            hit=np.frombuffer(cols.hit, dtype=np.int64),
            reuse_distance=np.frombuffer(cols.reuse, dtype=np.int64),
            session=np.frombuffer(cols.session, dtype=np.int64),
            prefix_key=np.frombuffer(cols.key, dtype=np.int64),
            models={names[i]: int(c) for i, c in enumerate(counts) if names[i]},
            skipped=self.skipped,
            estimated=self.estimated,
            reuse_source=next((k for k in REUSE_SOURCES if k in self.kinds), "none"),
            blocks_total=self.prefixes.total,
            blocks_seen=self.prefixes.any_seen,
        )
        return trace, np.frombuffer(cols.model, dtype=np.uint16)


def read_trace(
    source: str,
    fmt: TraceFormat | None = None,
    model: str | None = None,
    *,
    s3_client: Any = None,
) -> Trace:
    """Read the trace at `source` (a path, a folder of files, an s3:// URI or prefix) in format `fmt` (detected
    from its first line when None). `model` keeps only that model's requests of a log that holds several."""
    if fmt is not None and fmt not in FORMATS:
        raise InvalidInput(
            f"unknown trace format '{fmt}'", [Problem("format", f"use one of {', '.join(FORMATS)}")]
        )
    reading = _Reading(fmt)
    for name, fh in open_sources(source, s3_client):
        reading.file(name, fh)
    trace, model_idx = reading.trace(source)
    keep = _model_filter(source, reading.models, model, model_idx)
    if keep is not None:
        trace = _only(trace, keep)
        kept = [m for m in trace.models if _matches(m, model or "")]
        trace.models = {m: trace.models[m] for m in kept}
        trace.model = kept[0] if len(kept) == 1 else model
    elif len(trace.models) == 1:
        trace.model = next(iter(trace.models))
    if trace.n == 0:
        raise unreadable(source, "it holds no requests" + (f" of model {model}" if model else ""))
    _order(trace, bool(reading.cols.absolute))
    if trace.estimated:
        trace.notes.append(
            f"{trace.estimated:,} requests carried no token counts: counted from their text's length at 4 characters a"
            " token (an estimate)"
        )
    if trace.skipped:
        trace.notes.append(
            "not requests, skipped: " + ", ".join(f"{n:,} {why}" for why, n in sorted(trace.skipped.items()))
        )
    return trace


def _model_filter(
    source: str, models: dict[str, int], wanted: str | None, idx: np.ndarray
) -> np.ndarray | None:
    named = {m: i for m, i in models.items() if m}
    if wanted is None:
        if len(named) > 1:
            counts = np.bincount(idx, minlength=len(models))
            found = ", ".join(f"{m} ({int(counts[i]):,} requests)" for m, i in sorted(named.items()))
            raise InvalidInput(
                f"the trace {source} holds requests to several models: {found}; choose one with the spec's"
                " trace.model (sizing workload --model, sizing loadtest --trace-model)",
                [Problem("model", f"the trace holds several models ({found}): choose one")],
            )
        return None
    match = [i for m, i in named.items() if _matches(m, wanted)]
    if not match:
        found = ", ".join(sorted(named)) or "none named"
        raise InvalidInput(
            f"the trace {source} has no requests to model {wanted} (models found: {found})",
            [Problem("model", f"not in the trace (models found: {found})")],
        )
    return np.isin(idx, match)


def _matches(found: str, wanted: str) -> bool:
    """A model id of the log is the one asked for: the same, or it after a provider or Region prefix
    (`us.meta.llama3-1-8b-instruct-v1:0` for `meta.llama3-1-8b-instruct-v1:0`; an ARN's last part)."""
    return found == wanted or found.endswith(f".{wanted}") or found.endswith(f"/{wanted}")


def _only(trace: Trace, keep: np.ndarray) -> Trace:
    for name in ("t", "inp", "out", "hit", "reuse_distance", "session", "prefix_key"):
        setattr(trace, name, getattr(trace, name)[keep])
    return trace


def _order(trace: Trace, absolute: bool) -> None:
    """Arrival order, times since the first request (its epoch time kept in `start` when absolute)."""
    t = trace.t
    if t.size > 1 and not bool((t[1:] >= t[:-1]).all()):
        order = np.argsort(t, kind="stable")
        _only(trace, order)
        trace.notes.append(
            "the trace was not in time order: sorted by arrival (prefix reuse counted in file order)"
        )
        t = trace.t
    first = float(t[0])
    trace.start = first if absolute else None
    trace.t = t - first
