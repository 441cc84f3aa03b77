"""A trace's lines as records: a Mooncake line the fast path did not take, and the lines of the other formats (JSON
lines and CSV rows), each refused naming its file, line number and field when malformed."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from json.scanner import make_scanner
from typing import Any, Final

from sizing.traces.formats import CSV_COLUMNS, JSON_READERS, BadField, Record, Skip, TraceFormat, csv_row
from sizing.traces.sources import bad_line

#: The types of a list of whole numbers (hash_ids)
WHOLE: Final = frozenset({int})


def one_mooncake(name: str, lineno: int, text: str) -> Record:
    """A Mooncake line the fast path did not take: parsed and checked by `formats.mooncake` (or refused)."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        raise bad_line(name, lineno, "line", "is not a JSON object") from None
    try:
        return JSON_READERS["mooncake"](obj)
    except BadField as exc:
        raise bad_line(name, lineno, exc.field, exc.problem) from None


def records(
    fmt: TraceFormat, name: str, first: tuple[int, bytes], rows: Iterator[tuple[int, bytes]]
) -> Iterator[tuple[int, Record | None, Any]]:
    """(line number, record or None when skipped, whether its time is absolute -- or, skipped, why)."""
    if fmt == "csv":
        yield from _csv_records(name, first, rows)
        return
    parse = JSON_READERS[fmt]
    absolute = fmt != "mooncake"
    scan = make_scanner(json.JSONDecoder())  # type: ignore[arg-type]  # the C scanner json.loads ends in, without its wrappers
    for lineno, line in _chain(first, rows):
        try:
            text = line.decode("utf-8")
            obj, end = scan(text, 0)
            if end < len(text) and text[end:].strip():
                raise ValueError("text after the object")
        except StopIteration:
            try:
                obj = json.loads(text)  # leading white space
            except (ValueError, RecursionError):
                raise bad_line(name, lineno, "line", "is not a JSON object") from None
        except (ValueError, RecursionError):
            raise bad_line(name, lineno, "line", "is not a JSON object") from None
        try:
            yield lineno, parse(obj), absolute
        except BadField as exc:
            raise bad_line(name, lineno, exc.field, exc.problem) from None
        except Skip as exc:
            yield lineno, None, exc.why


def _chain(first: tuple[int, bytes], rows: Iterator[tuple[int, bytes]]) -> Iterator[tuple[int, bytes]]:
    yield first
    yield from rows


def _csv_records(
    name: str, first: tuple[int, bytes], rows: Iterator[tuple[int, bytes]]
) -> Iterator[tuple[int, Record | None, Any]]:
    numbers: list[int] = []

    def text() -> Iterator[str]:
        for lineno, line in _chain(first, rows):
            numbers.append(lineno)
            yield line.decode("utf-8-sig", "replace")

    reader = csv.DictReader(text())
    header = [h.strip() for h in reader.fieldnames or []]
    reader.fieldnames = header
    missing = [c for c in ("input_tokens", "output_tokens") if c not in header]
    if "timestamp" not in header and "timestamp_ms" not in header:
        missing.insert(0, "timestamp")
    if missing:
        raise bad_line(
            name,
            numbers[0] if numbers else 1,
            missing[0],
            f"the header has no {', '.join(missing)} column (columns: {', '.join(CSV_COLUMNS)})",
        )
    for row in reader:
        lineno = numbers[-1]
        try:
            rec, absolute = csv_row(row)
        except BadField as exc:
            raise bad_line(name, lineno, exc.field, exc.problem) from None
        yield lineno, rec, absolute
