"""Where a trace's bytes come from: a local file or folder of files (plain or gzip), or, deployed, an S3 object or
every object under an S3 prefix; and the two ways a trace is refused, naming its path or URI (`unreadable`) or its
file, line and field (`bad_line`)."""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Final, cast

from sizing.base.errors import InvalidInput, Problem

#: The field a trace's problems are reported under.
FIELD: Final = "trace"


def bad_line(source: str, lineno: int, field_name: str, problem: str) -> InvalidInput:
    message = f"{source}, line {lineno}, field {field_name}: {problem}"
    return InvalidInput(f"the trace has a malformed line: {message}", [Problem(FIELD, message)])


def unreadable(source: str, why: str) -> InvalidInput:
    return InvalidInput(f"cannot read the trace {source}: {why}", [Problem(FIELD, f"{source}: {why}")])


def _maybe_gunzip(raw: IO[bytes]) -> IO[bytes]:
    """The stream itself, or its gunzipped content where it starts with gzip's magic bytes (Bedrock delivers its
    logs to S3 as .json.gz)."""
    buffered: Any = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)
    if buffered.peek(2)[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=buffered)  # type: ignore[return-value]
    return cast("IO[bytes]", buffered)


def _local(path: str) -> Iterator[tuple[str, IO[bytes]]]:
    p = Path(path)
    files = sorted(x for x in p.iterdir() if x.is_file()) if p.is_dir() else [p]
    for f in files:
        try:
            fh = f.open("rb")
        except OSError as exc:
            raise unreadable(str(f), exc.strerror or "cannot open it") from None
        with fh:
            yield str(f), _maybe_gunzip(fh)


def _s3(uri: str, client: Any) -> Iterator[tuple[str, IO[bytes]]]:
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, _, key = uri[len("s3://") :].partition("/")
    if not bucket:
        raise unreadable(uri, "an S3 URI is s3://bucket/key (or s3://bucket/prefix/)")
    if client is None:
        import boto3

        client = boto3.client("s3")
    try:
        if key and not key.endswith("/"):
            keys = [key]
        else:
            keys = []
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key):
                keys += [o["Key"] for o in page.get("Contents", []) if not o["Key"].endswith("/")]
            if not keys:
                raise unreadable(uri, "no objects under this prefix")
        for k in sorted(keys):
            name = f"s3://{bucket}/{k}"
            body = client.get_object(Bucket=bucket, Key=k)["Body"]
            yield name, _maybe_gunzip(body)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "error")
        raise unreadable(uri, f"S3 refused it ({code})") from None
    except BotoCoreError as exc:
        raise unreadable(uri, f"S3 could not be reached ({type(exc).__name__})") from None


def open_sources(source: str, s3_client: Any) -> Iterator[tuple[str, IO[bytes]]]:
    if source.startswith("s3://"):
        return _s3(source, s3_client)
    p = Path(source)
    if not p.exists():
        raise unreadable(source, "no such file")
    return _local(source)
