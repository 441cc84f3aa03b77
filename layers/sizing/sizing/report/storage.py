"""Reports of runs in S3: `{prefix}/{run_id}/report.html` beside its exports, and presigned links to them.

In AWS the API's `GET /runs/{id}/report` serves the page from here (or redirects to a presigned URL, so large
reports bypass API Gateway's payload limit). The adapter takes an optional client; none is created at import."""

from __future__ import annotations

import re
from typing import Any

from sizing.base.errors import InvalidInput, NotFound
from sizing.report.export import export_csv, rejected_csv
from sizing.report.page import render_report

#: Presigned links live long enough to open from an API response or a Slack message, briefly enough that a
#: forwarded link soon stops working.
DEFAULT_PRESIGN_S = 900
#: SigV4 presigned URLs cannot outlive seven days.
MAX_PRESIGN_S = 7 * 24 * 3600
#: Run ids become one S3 key segment: no slashes, no dot-segments, nothing a key would need escaped.
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
CONTENT_TYPES = {
    "report.html": "text/html; charset=utf-8",
    "architectures.csv": "text/csv; charset=utf-8",
    "rejected.csv": "text/csv; charset=utf-8",
    "result.json": "application/json",
}


class ReportStore:
    """Report pages and exports of runs in one S3 bucket."""

    def __init__(self, bucket: str, client: Any | None = None, prefix: str = "reports") -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3
            from botocore.config import Config

            # SigV4 links: the only kind every region accepts, and the one that honours expiry up to 7 days
            self._client = boto3.client("s3", config=Config(signature_version="s3v4"))
        return self._client

    def key(self, run_id: str, name: str = "report.html") -> str:
        if not RUN_ID.match(run_id) or ".." in run_id:
            raise InvalidInput(f"not a run id: {run_id!r}", details={"field": "run_id"})
        if name not in CONTENT_TYPES:
            raise InvalidInput(f"no such report file: {name!r}", details={"field": "name"})
        return f"{self.prefix}/{run_id}/{name}"

    def put(self, run_id: str, name: str, body: str) -> str:
        """Store one file of a run's report; returns its key."""
        key = self.key(run_id, name)
        self.client.put_object(
            Bucket=self.bucket,
            Key=key,
            Body=body.encode("utf-8"),
            ContentType=CONTENT_TYPES[name],
            ContentDisposition="inline" if name == "report.html" else f'attachment; filename="{name}"',
        )
        return key

    def publish(
        self,
        run_id: str,
        result: dict[str, Any],
        *,
        measurements: list[dict[str, Any]] | None = None,
        manifests: dict[str, str] | None = None,
        html: str | None = None,
    ) -> list[str]:
        """Render (unless `html` is given) and store the report with architectures.csv, rejected.csv and
        result.json; returns the keys written."""
        import json

        page = (
            html
            if html is not None
            else render_report(result, measurements=measurements, manifests=manifests)
        )
        files = {
            "report.html": page,
            "architectures.csv": export_csv(result),
            "rejected.csv": rejected_csv(result),
            "result.json": json.dumps(result, default=str),
        }
        return [self.put(run_id, name, body) for name, body in files.items()]

    def get(self, run_id: str, name: str = "report.html") -> str:
        """The stored file; NotFound when the run has no report (yet)."""
        key = self.key(run_id, name)
        try:
            obj = self.client.get_object(Bucket=self.bucket, Key=key)
        except self.client.exceptions.NoSuchKey:
            raise NotFound(f"run {run_id} has no {name}", field_name="run_id") from None
        return str(obj["Body"].read().decode("utf-8"))

    def presigned_url(
        self, run_id: str, name: str = "report.html", expires_s: int = DEFAULT_PRESIGN_S
    ) -> str:
        """A time-limited GET link to the stored file (the caller checks that the run exists)."""
        if not 1 <= expires_s <= MAX_PRESIGN_S:
            raise InvalidInput(
                f"expires_s must be between 1 and {MAX_PRESIGN_S} seconds", details={"field": "expires_s"}
            )
        key = self.key(run_id, name)
        return str(
            self.client.generate_presigned_url(
                "get_object",
                Params={"Bucket": self.bucket, "Key": key, "ResponseContentType": CONTENT_TYPES[name]},
                ExpiresIn=expires_s,
            )
        )
