"""The events of model releases: `ModelReleased` in (from anyone, or the Hub poller), `SizingEstimateReady` out,
and the scheduled poll. Each detail is a strict pydantic model; a bad event is an InvalidInput naming the field."""

from __future__ import annotations

import functools
import hashlib
import json
from typing import TYPE_CHECKING, Any, cast

from pydantic import Field, ValidationError

from sizing.base.errors import InvalidInput, Problem, problems_from_pydantic
from sizing.base.strict import Strict

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.parser.models import EventBridgeModel

#: EventBridge detail-types of this feature (the rule on the bus matches MODEL_RELEASED).
MODEL_RELEASED = "ModelReleased"
SIZING_ESTIMATE_READY = "SizingEstimateReady"
MODEL_RELEASE_REJECTED = "ModelReleaseRejected"
#: `source` of the events this product publishes (anyone may publish ModelReleased under their own source).
EVENT_SOURCE = "llm-sizing.releases"

#: Hugging Face ids are `org/name`: letters, digits, `-`, `_`, `.`; the Hub caps a repo name at 96 characters,
#: an org name at 42 (huggingface_hub's validate_repo_id); 200 bounds the whole id generously.
MODEL_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$"
MODEL_ID_MAX = 200
#: A URL to a config.json: long enough for any Hub resolve URL with a revision, short enough to refuse junk.
URL_MAX = 2048


class ModelReleased(Strict):
    """Detail of a `ModelReleased` event: the model's Hugging Face id and its config.json (content or URL)."""

    model_id: str = Field(pattern=MODEL_ID_PATTERN, max_length=MODEL_ID_MAX)
    config: dict[str, Any] | str = Field(
        description="the config.json content, or an https URL of it on the Hugging Face Hub"
    )
    source: str = Field(min_length=1, max_length=128, description="who announced the release")

    @property
    def config_url(self) -> str | None:
        return self.config if isinstance(self.config, str) else None


class RejectedProblem(Strict):
    """One reason a release was refused, named by the field in the event or config.json."""

    field: str
    message: str


class ModelReleaseRejected(Strict):
    """Detail of a `ModelReleaseRejected` event: a `ModelReleased` this product refused, and why."""

    model_id: str | None = Field(description="the announced model id, when the event had a readable one")
    reason: str = Field(description="one sentence a person can act on")
    problems: list[RejectedProblem] = Field(default_factory=list)


#: Hex characters of a config digest kept: 64 bits tell apart every config.json a model id will ever be
#: released with (a collision needs ~4 billion configs of one model), and keep the idempotency key short.
CONFIG_DIGEST_CHARS = 16


def config_digest(config: dict[str, Any]) -> str:
    """A short SHA-256 of the config.json's canonical JSON (sorted keys, no spacing): a re-release with a changed
    config gets another digest, the same config sent again (inline or fetched from its URL) the same one."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:CONFIG_DIGEST_CHARS]


@functools.cache
def _envelope_model() -> type[EventBridgeModel]:
    """Powertools' EventBridge envelope (every field AWS delivers) with `detail` an object. Built on first use:
    the parser's import adds ~70 ms (`python -X importtime`), and the API handler imports this module for the
    event shapes, never to read an envelope."""
    from aws_lambda_powertools.utilities.parser.models import EventBridgeModel

    class ReleaseEnvelope(EventBridgeModel):
        #: EventBridge always sends it; moto's bus (the embedded default, the tests) leaves it out, and it is not
        #: read here
        account: str | None = None  # type: ignore[assignment]
        #: an object (Powertools' own annotation also admits model classes, which a JSON event never holds)
        detail: dict[str, Any]

    return ReleaseEnvelope


def parse_model_released(event: Any) -> ModelReleased:
    """An EventBridge event → its `ModelReleased` detail. InvalidInput names each problem (`detail.model_id`);
    its `details["model_id"]` is the announced model id when the event has a readable one."""
    if not isinstance(event, dict):
        raise InvalidInput("not an EventBridge event", [Problem("event", "must be an object")])
    try:
        envelope = _envelope_model().model_validate(event)
    except ValidationError as exc:
        raise InvalidInput("not an EventBridge event", problems_from_pydantic(exc)) from None
    detail = cast("dict[str, Any]", envelope.detail)  # ReleaseEnvelope's detail is an object
    announced = {"model_id": detail["model_id"]} if isinstance(detail.get("model_id"), str) else {}
    if envelope.detail_type != MODEL_RELEASED:
        raise InvalidInput(
            f"expected a {MODEL_RELEASED} event, got '{envelope.detail_type}'",
            [Problem("detail-type", f"must be {MODEL_RELEASED}")],
            announced,
        )
    try:
        release = ModelReleased.model_validate(detail)
    except ValidationError as exc:
        raise InvalidInput(
            "the ModelReleased event is not valid", problems_from_pydantic(exc, "detail"), announced
        ) from None
    if isinstance(release.config, str) and not release.config.startswith(("https://", "http://")):
        raise InvalidInput(
            "the ModelReleased event's config is neither a config.json object nor a URL",
            [Problem("detail.config", "give the config.json content (an object) or its https URL")],
            announced,
        )
    return release


class PollRequest(Strict):
    """What EventBridge Scheduler passes to the poller (the schedule's Input in template.yaml)."""

    scheduled_time: str | None = Field(default=None, max_length=64)
    execution_id: str | None = Field(default=None, max_length=128)


def parse_poll_request(event: Any) -> PollRequest:
    try:
        return PollRequest.model_validate(event or {})
    except ValidationError as exc:
        raise InvalidInput("the schedule's input is not valid", problems_from_pydantic(exc)) from None
