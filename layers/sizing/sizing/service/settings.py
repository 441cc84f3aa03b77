"""The environment of the API function, parsed once into a typed model (logic never reads os.environ)."""

from __future__ import annotations

from pydantic import Field

from sizing.base.envsettings import EnvSettings

#: Idempotency records of POST /runs live one day: a client retrying a request (network error, timeout) does so
#: within minutes; a day also covers a person re-running a script the next morning by mistake.
IDEMPOTENCY_TTL_S = 24 * 3600


class ApiSettings(EnvSettings):
    """What the API needs from its environment (set by template.yaml, or by `sizing serve`)."""

    OWNER = "the API function"

    table_name: str = Field(alias="TABLE_NAME", min_length=3, max_length=255)
    state_machine_arn: str | None = Field(default=None, alias="STATE_MACHINE_ARN", pattern=r"^arn:")
    stage: str = Field(default="dev", alias="STAGE")
    idempotency_ttl_s: int = Field(default=IDEMPOTENCY_TTL_S, alias="IDEMPOTENCY_TTL_S", gt=0)
    report_bucket: str | None = Field(default=None, alias="REPORT_BUCKET", min_length=3, max_length=63)
