"""The Slack functions' environment, parsed once into a typed model (logic never reads os.environ)."""

from __future__ import annotations

from pydantic import Field

from sizing.base.envsettings import EnvSettings

#: Secrets are re-read from Secrets Manager at most every five minutes per warm Lambda: a rotated signing secret
#: or bot token takes effect within five minutes, and a busy channel costs one GetSecretValue per container per
#: five minutes instead of one per request.
SECRET_MAX_AGE_S = 300
#: A report link in a channel is opened within the day it is posted; a day also bounds how long a forwarded
#: link works. (Presigned with the function's role credentials, it may stop earlier, when they expire.)
REPORT_LINK_TTL_S = 24 * 3600
#: Slack's Web API (chat.postMessage); tests and `sizing serve` point it at a fake on loopback.
SLACK_API_URL = "https://slack.com/api/"


class SlackSettings(EnvSettings):
    """What the Slack functions need from their environment (set by template.yaml, or by tests)."""

    OWNER = "the Slack function"

    table_name: str = Field(alias="TABLE_NAME", min_length=3, max_length=255)
    #: One Secrets Manager secret holding {"signing_secret": ..., "bot_token": ...} (JSON).
    secret_id: str = Field(alias="SLACK_SECRET_ID", min_length=1, max_length=2048)
    secret_max_age_s: int = Field(default=SECRET_MAX_AGE_S, alias="SLACK_SECRET_MAX_AGE_S", ge=0, le=3600)
    state_machine_arn: str | None = Field(default=None, alias="STATE_MACHINE_ARN", pattern=r"^arn:")
    worker_function: str | None = Field(default=None, alias="SLACK_WORKER_FUNCTION", min_length=1)
    slack_api_url: str = Field(default=SLACK_API_URL, alias="SLACK_API_URL", pattern=r"^https?://")
    #: Base URL the report links point at (the API stage URL): `{base}/runs/{run_id}/report`.
    report_base_url: str | None = Field(default=None, alias="REPORT_BASE_URL", pattern=r"^https?://")
    #: S3 bucket of reports (`sizing.report.storage.ReportStore`): when set, each estimate's report is stored
    #: there and linked from the Slack message with a presigned URL valid `report_link_ttl_s`.
    report_bucket: str | None = Field(default=None, alias="REPORT_BUCKET", min_length=3, max_length=63)
    report_link_ttl_s: int = Field(
        default=REPORT_LINK_TTL_S, alias="REPORT_LINK_TTL_S", ge=60, le=7 * 24 * 3600
    )
    #: Budget passed with every run started from Slack (the state machine refuses runs estimated above it).
    run_budget_usd: float | None = Field(default=None, alias="SLACK_RUN_BUDGET_USD", gt=0)
    idempotency_ttl_s: int = Field(default=24 * 3600, alias="IDEMPOTENCY_TTL_S", gt=0)
    #: Who may start measured runs (they cost money): Slack user ids and/or channel ids, comma-separated.
    #: Empty: anyone who can see the estimate (the confirmation dialog and the run budget still apply).
    measure_allowed: str = Field(default="", alias="SLACK_MEASURE_ALLOWED", max_length=4096)

    def measure_allowlist(self) -> frozenset[str]:
        return frozenset(x.strip() for x in self.measure_allowed.split(",") if x.strip())
