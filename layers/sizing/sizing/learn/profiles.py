"""Versioned correction profiles in S3, and the adopted one as every estimator loads it.

Objects (bucket `CALIBRATION_BUCKET`, prefix `CALIBRATION_PREFIX`, default `calibration/`):
  {prefix}versions/{version}.json   one refit: its corrections, measured configurations, cross-validation
                                    tables, decision and what changed; `status` adopted or candidate
  {prefix}adopted.json              the pointer: the adopted version and the versions adopted before it

Adoption writes the pointer with `If-Match` on the ETag the refit read it at (`If-None-Match: *` when there was
none): of two refits at once, the second to write gets 412 Precondition Failed and its version stays a candidate
("lost to a concurrent refit"). A refit writes its version object first and the pointer last, so a refit that
fails leaves the adopted profile untouched.

Estimators keep the adopted profile per container and check the pointer's ETag (a conditional GET, 304 when
unchanged) at most every `CHECK_INTERVAL_S`. A version object that cannot be read or parsed is logged as an error
naming the object, and the next version the pointer's history names is used (the newest valid one).
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sizing.perf.profile import STEP_CORRECTION_FACTORS

log = logging.getLogger("sizing.learn")

DEFAULT_PREFIX = "calibration/"
POINTER = "adopted.json"
#: The version name of "no team correction": the shipped reference profile alone (a rollback target).
REFERENCE = "reference"
#: Seconds an estimator trusts its cached adopted profile before checking the pointer's ETag again: one
#: estimate's many profile look-ups (a planner call makes hundreds) share one check, and a new adoption reaches
#: every warm container within this time (assumed; a conditional GET costs a few ms).
CHECK_INTERVAL_S = 5.0
#: Bucket of the embedded default (created on its moto S3 on first use) when CALIBRATION_BUCKET is not set.
LOCAL_BUCKET = "llm-sizing-calibration-local"
FORMAT = 1


class CorruptProfile(Exception):
    """A profile object that is not a profile (named in the message)."""


class ConcurrentAdoption(Exception):
    """The pointer changed since the refit read it: another refit (or a rollback) adopted first."""


def new_version(now: datetime | None = None, salt: str = "") -> str:
    """Sortable, unique: UTC time to the microsecond, then a short digest."""
    t = now or datetime.now(UTC)
    digest = hashlib.sha256(f"{t.isoformat()}{salt}{os.getpid()}{threading.get_ident()}".encode()).hexdigest()
    return t.strftime("%Y%m%dT%H%M%S%fZ") + "-" + digest[:6]


@dataclass
class ProfileStore:
    """The profile objects of one bucket and prefix."""

    bucket: str
    prefix: str = DEFAULT_PREFIX
    client: Any = None

    def __post_init__(self) -> None:
        if self.client is None:
            import boto3

            self.client = boto3.client("s3")
        if not self.prefix.endswith("/"):
            self.prefix += "/"

    # --- names --------------------------------------------------------------------------------------------
    def version_key(self, version: str) -> str:
        return f"{self.prefix}versions/{version}.json"

    @property
    def pointer_key(self) -> str:
        return f"{self.prefix}{POINTER}"

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    # --- reading ------------------------------------------------------------------------------------------
    def _not_found(self, exc: Exception) -> bool:
        code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
        return code in ("NoSuchKey", "404", "NoSuchBucket", "NotFound")

    def read_pointer(self) -> tuple[dict[str, Any] | None, str | None]:
        """(pointer, its ETag); (None, None) when nothing was adopted yet. CorruptProfile when unreadable."""
        from botocore.exceptions import ClientError

        try:
            out = self.client.get_object(Bucket=self.bucket, Key=self.pointer_key)
        except ClientError as exc:
            if self._not_found(exc):
                return None, None
            raise
        body = out["Body"].read()
        try:
            data = json.loads(body)
            if not isinstance(data, dict) or not isinstance(data.get("version"), str):
                raise ValueError("no version named")
        except ValueError as exc:
            raise CorruptProfile(f"{self.uri(self.pointer_key)} is not a profile pointer ({exc})") from None
        return data, str(out["ETag"])

    def read_version(self, version: str) -> dict[str, Any]:
        """A version object, validated enough to use; CorruptProfile (naming the object) when it is not."""
        from botocore.exceptions import ClientError

        key = self.version_key(version)
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except ClientError as exc:
            if self._not_found(exc):
                raise CorruptProfile(f"{self.uri(key)} does not exist") from None
            raise
        try:
            data = json.loads(body)
            if not isinstance(data, dict) or data.get("version") != version:
                raise ValueError("it names another version or none")
            corrections = data.get("corrections")
            if not isinstance(corrections, dict):
                raise ValueError("no corrections")
            for k, c in corrections.items():
                for s in ("prefill_scale", "decode_scale"):
                    if not isinstance(c.get(s), int | float) or not c[s] > 0:
                        raise ValueError(f"{k}: {s} is not a positive number")
                steps = c.get("steps")
                if steps is not None:
                    for s in STEP_CORRECTION_FACTORS:
                        if not isinstance(steps.get(s), int | float) or not steps[s] >= 0:
                            raise ValueError(f"{k}: steps.{s} is not a number at or above 0")
                    for s in ("compute_eff", "bandwidth_eff"):
                        if not 0 < steps[s] <= 1:
                            raise ValueError(f"{k}: steps.{s} is not a share of the datasheet figure (0-1]")
            if not isinstance(data.get("measured", []), list):
                raise ValueError("measured is not a list")
        except (ValueError, AttributeError, TypeError) as exc:
            raise CorruptProfile(f"{self.uri(key)} is not a valid profile ({exc})") from None
        return data

    def list_versions(self) -> list[str]:
        """Every stored version, newest first."""
        from botocore.exceptions import ClientError

        names: list[str] = []
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": f"{self.prefix}versions/"}
        try:
            while True:
                out = self.client.list_objects_v2(**kwargs)
                names += [
                    o["Key"].rsplit("/", 1)[-1].removesuffix(".json")
                    for o in out.get("Contents", [])
                    if o["Key"].endswith(".json")
                ]
                if not out.get("IsTruncated"):
                    break
                kwargs["ContinuationToken"] = out["NextContinuationToken"]
        except ClientError as exc:
            if self._not_found(exc):
                return []
            raise
        return sorted(names, reverse=True)

    # --- writing ------------------------------------------------------------------------------------------
    def ensure_bucket(self) -> None:
        """Create the bucket when it does not exist (the embedded default's moto S3; on AWS the stack has it)."""
        from botocore.exceptions import ClientError

        try:
            self.client.head_bucket(Bucket=self.bucket)
        except ClientError:
            self.client.create_bucket(Bucket=self.bucket)

    def write_version(self, data: dict[str, Any]) -> None:
        body = json.dumps(data, indent=1, sort_keys=True, default=str).encode()
        self.client.put_object(
            Bucket=self.bucket,
            Key=self.version_key(data["version"]),
            Body=body,
            ContentType="application/json",
        )

    def write_pointer(self, pointer: dict[str, Any], expected_etag: str | None) -> str:
        """Write the pointer only if it is still what the writer read (`expected_etag`; None: there was none).
        ConcurrentAdoption when another writer came first. Returns the new ETag."""
        from botocore.exceptions import ClientError

        body = json.dumps(pointer, indent=1, sort_keys=True).encode()
        cond = {"IfMatch": expected_etag} if expected_etag else {"IfNoneMatch": "*"}
        try:
            out = self.client.put_object(
                Bucket=self.bucket, Key=self.pointer_key, Body=body, ContentType="application/json", **cond
            )
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409"):
                raise ConcurrentAdoption(
                    f"{self.uri(self.pointer_key)} changed since it was read: another refit adopted first"
                ) from None
            raise
        invalidate()
        return str(out["ETag"])

    def adopt(
        self, version: str, expected_etag: str | None, previous: dict[str, Any] | None, reason: str
    ) -> str:
        history = [version] + [v for v in (previous or {}).get("history", []) if v != version]
        pointer = {
            "version": version,
            "history": history,
            "updated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "reason": reason,
        }
        return self.write_pointer(pointer, expected_etag)

    # --- the adopted profile, newest valid first ------------------------------------------------------------
    def adopted(self) -> dict[str, Any] | None:
        """The adopted version's object (None: the reference profile alone). A corrupt object is logged as an error
        naming it and the next version of the pointer's history is tried; a corrupt pointer falls back to the
        newest valid stored version whose status is adopted."""
        try:
            pointer, _etag = self.read_pointer()
        except CorruptProfile as exc:
            log.error(
                "calibration profile pointer unusable: %s; falling back to the newest valid version", exc
            )
            return self._newest_valid(self.list_versions(), adopted_only=True)
        if pointer is None:
            return None
        order = [pointer["version"]] + [v for v in pointer.get("history", []) if v != pointer["version"]]
        return self._newest_valid(order)

    def _newest_valid(self, versions: list[str], adopted_only: bool = False) -> dict[str, Any] | None:
        for v in versions:
            if v == REFERENCE:
                return None
            try:
                data = self.read_version(v)
            except CorruptProfile as exc:
                log.error("calibration profile unusable: %s; trying the version adopted before it", exc)
                continue
            if adopted_only and data.get("status") != "adopted":
                continue
            return data
        return None


# --- per-container cache --------------------------------------------------------------------------------
@dataclass
class _Cached:
    key: tuple[str, ...]
    etag: str | None
    data: dict[str, Any] | None
    checked: float
    lock: threading.Lock = field(default_factory=threading.Lock)


_cache: _Cached | None = None
_cache_lock = threading.Lock()
_override: ProfileStore | None = None


#: A folder that keeps a laptop's profiles between commands (`sizing run --endpoint` refits into it, the next
#: `sizing estimate` reads it): the same objects as the bucket's, as files.
DIR_ENV = "SIZING_CALIBRATION_DIR"


class FolderObjects:
    """The few S3 calls `ProfileStore` makes (with S3's parameter names), on a local folder: objects are files under `root/<bucket>/`, an ETag
    is the SHA-256 of the body, and a conditional put checks it (IfMatch / IfNoneMatch="*") under a lock file, so
    two commands refitting at once behave as two refits against S3 do. Errors are botocore's, with S3's codes."""

    def __init__(self, root: str) -> None:
        self.root = Path(root)

    def _path(self, bucket: str, key: str) -> Path:
        return self.root / bucket / key

    @staticmethod
    def _error(code: str, op: str) -> Exception:
        from botocore.exceptions import ClientError

        return ClientError({"Error": {"Code": code, "Message": code}}, op)

    @staticmethod
    def _etag(body: bytes) -> str:
        return f'"{hashlib.sha256(body).hexdigest()[:32]}"'

    def head_bucket(self, Bucket: str) -> dict[str, Any]:
        if not (self.root / Bucket).is_dir():
            raise self._error("404", "HeadBucket")
        return {}

    def create_bucket(self, Bucket: str) -> dict[str, Any]:
        (self.root / Bucket).mkdir(parents=True, exist_ok=True)
        return {}

    def get_object(self, Bucket: str, Key: str) -> dict[str, Any]:
        path = self._path(Bucket, Key)
        if not path.is_file():
            raise self._error("NoSuchKey", "GetObject")
        body = path.read_bytes()
        return {"Body": io.BytesIO(body), "ETag": self._etag(body)}

    def put_object(self, Bucket: str, Key: str, Body: bytes, **kw: Any) -> dict[str, Any]:
        path = self._path(Bucket, Key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.root / f".{Bucket}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            current = self._etag(path.read_bytes()) if path.is_file() else None
            if ("IfMatch" in kw and kw["IfMatch"] != current) or (kw.get("IfNoneMatch") == "*" and current):
                raise self._error("PreconditionFailed", "PutObject")
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(Body)
            tmp.replace(path)
        return {"ETag": self._etag(Body)}

    def list_objects_v2(self, Bucket: str, Prefix: str = "", **_kw: Any) -> dict[str, Any]:
        base = self.root / Bucket
        keys = sorted(str(p.relative_to(base)) for p in base.rglob("*.json")) if base.is_dir() else []
        return {"Contents": [{"Key": k} for k in keys if k.startswith(Prefix)], "IsTruncated": False}


def configured_store() -> ProfileStore | None:
    """The store estimators read: `use_store`'s, else a local folder (SIZING_CALIBRATION_DIR: a laptop's learning
    kept between commands), else CALIBRATION_BUCKET (and CALIBRATION_PREFIX), else on the embedded default
    (SIZING_BACKEND=local with AWS_ENDPOINT_URL pointing at its moto) the local bucket. None elsewhere: a laptop
    estimate with no stack uses the reference profile alone and makes no AWS call."""
    if _override is not None:
        return _override
    folder = os.environ.get(DIR_ENV)
    if folder:
        fkey = ("folder", os.path.abspath(folder), "")
        with _cache_lock:
            found = _stores.get(fkey)
            if found is None:
                found = _stores[fkey] = ProfileStore(LOCAL_BUCKET, DEFAULT_PREFIX, FolderObjects(fkey[1]))
        return found
    bucket = os.environ.get("CALIBRATION_BUCKET")
    endpoint = os.environ.get("AWS_ENDPOINT_URL", "")
    if not bucket and os.environ.get("SIZING_BACKEND") == "local" and endpoint:
        bucket = LOCAL_BUCKET
    if not bucket:
        return None
    key = (bucket, os.environ.get("CALIBRATION_PREFIX", DEFAULT_PREFIX), endpoint)
    with _cache_lock:
        store = _stores.get(key)
    if store is None:  # one client per configuration: a planner call looks profiles up hundreds of times
        import boto3

        store = ProfileStore(key[0], key[1], boto3.client("s3"))
        with _cache_lock:
            _stores[key] = store
    return store


_stores: dict[tuple[str, str, str], ProfileStore] = {}


def use_store(store: ProfileStore | None) -> None:
    """Point this process's estimators at `store` (tests, the embedded default); None: back to the environment."""
    global _override
    _override = store
    invalidate()


def invalidate() -> None:
    """Forget the cached adopted profile (the next look-up reads the pointer again)."""
    global _cache
    with _cache_lock:
        _cache = None


def active() -> dict[str, Any] | None:
    """The adopted profile this container uses (None: the reference profile alone), cached and revalidated by
    the pointer's ETag at most every CHECK_INTERVAL_S."""
    global _cache
    store = configured_store()
    if store is None:
        return None
    key = (os.environ.get("AWS_ENDPOINT_URL", ""), store.bucket, store.prefix)
    now = time.monotonic()
    with _cache_lock:
        cached = _cache if _cache is not None and _cache.key == key else None
        if cached is not None and now - cached.checked < CHECK_INTERVAL_S:
            return cached.data
    etag, data = _load(store, cached)
    with _cache_lock:
        _cache = _Cached(key, etag, data, time.monotonic())
    return data


def _load(store: ProfileStore, cached: _Cached | None) -> tuple[str | None, dict[str, Any] | None]:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        if cached is not None and cached.etag:
            try:
                store.client.head_object(Bucket=store.bucket, Key=store.pointer_key, IfNoneMatch=cached.etag)
            except ClientError as exc:
                if str(exc.response.get("Error", {}).get("Code")) == "304":
                    return cached.etag, cached.data
                if not store._not_found(exc):
                    raise
        try:
            _pointer, etag = store.read_pointer()
        except CorruptProfile:
            etag = None
        return etag, store.adopted()
    except (ClientError, BotoCoreError) as exc:
        # S3 unreachable: keep what this container had (or the reference profile), and say so
        log.warning(
            "calibration profile not checked (%s): using %s", exc, "the cached one" if cached else "none"
        )
        return (cached.etag, cached.data) if cached else (None, None)
