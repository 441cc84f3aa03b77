"""The environment of the release functions (model_release, release_poller), parsed once into a typed model."""

from __future__ import annotations

from pydantic import Field

from sizing.base.envsettings import EnvSettings
from sizing.releases.hub import HUB_URL
from sizing.slack.settings import SLACK_API_URL

#: Idempotency records of (model, watch) live a week: EventBridge retries a delivery for up to 24 hours and a
#: person re-publishing a release by hand does so within days; a week covers both, and then the table's TTL
#: removes the record.
RELEASE_IDEMPOTENCY_TTL_S = 7 * 24 * 3600


class ReleaseSettings(EnvSettings):
    """Set by template.yaml (or by tests)."""

    OWNER = "the release function"

    table_name: str = Field(alias="TABLE_NAME", min_length=3, max_length=255)
    event_bus_name: str = Field(alias="EVENT_BUS_NAME", min_length=1, max_length=256)
    state_machine_arn: str | None = Field(default=None, alias="STATE_MACHINE_ARN", pattern=r"^arn:")
    hub_url: str = Field(default=HUB_URL, alias="HF_HUB_URL", pattern=r"^https?://")
    hub_token_secret: str | None = Field(default=None, alias="HF_TOKEN_SECRET")
    #: The Slack app's credentials secret (JSON with bot_token), the same one the Slack bot reads.
    slack_secret_id: str | None = Field(default=None, alias="SLACK_SECRET_ID")
    #: The Slack Web API the bot posts to (the bot's own `SLACK_API_URL`): tests point it at a local fake.
    slack_api_url: str = Field(default=SLACK_API_URL, alias="SLACK_API_URL", pattern=r"^https?://")
    #: The fan-out queue: one message per (model, watch), re-sized by the release fan-out function. Unset: the
    #: release function re-sizes its watches inline (one-off local use).
    release_queue_url: str | None = Field(default=None, alias="RELEASE_QUEUE_URL", pattern=r"^https?://")
    idempotency_ttl_s: int = Field(default=RELEASE_IDEMPOTENCY_TTL_S, alias="RELEASE_IDEMPOTENCY_TTL_S", gt=0)
