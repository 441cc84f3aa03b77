"""The release functions' AWS-backed dependencies, built lazily on first use (never at import) and replaceable
with `configure()` (tests inject moto clients, a fake Slack poster and a local Hub)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sizing.errors import Problem
from sizing.releases.catalog import ModelRegistry
from sizing.releases.fanout import FanoutConsumer, WatchQueue
from sizing.releases.hub import HubClient
from sizing.releases.notify import (
    EventBridgeNotifier,
    Notifier,
    SlackNotifier,
    SlackPoster,
    WebClientSlackPoster,
)
from sizing.releases.poller import BusPublisher, PollReport, SeenState, poll
from sizing.releases.service import ReleaseService
from sizing.releases.settings import ReleaseSettings
from sizing.releases.watches import WatchService
from sizing.service.errors import Unavailable
from sizing.service.runs import RunsService
from sizing.store import SizingStore

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    from sizing.catalog import Catalog

#: Idempotency records of releases share the table under their own partition key and carry its TTL attribute.
IDEMPOTENCY_PK = "IDEMPOTENCY#releases"
#: Secrets are cached for five minutes (Powertools Parameters max_age): a rotated token is picked up quickly,
#: and a burst of releases reads the secret once.
SECRET_MAX_AGE_S = 300


@dataclass
class _State:
    settings: ReleaseSettings | None = None
    dynamodb: Any = None
    sfn: Any = None
    events: Any = None
    sqs: Any = None
    slack_poster: SlackPoster | None = None
    hub: HubClient | None = None
    idempotency: DynamoDBPersistenceLayer | None = None


_state = _State()


def configure(
    settings: ReleaseSettings | None = None,
    *,
    dynamodb: Any = None,
    sfn: Any = None,
    events: Any = None,
    sqs: Any = None,
    slack_poster: SlackPoster | None = None,
    hub: HubClient | None = None,
) -> None:
    """Replace the settings and/or clients; everything built from them is rebuilt on next use."""
    global _state
    _state = _State(
        settings=settings,
        dynamodb=dynamodb,
        sfn=sfn,
        events=events,
        sqs=sqs,
        slack_poster=slack_poster,
        hub=hub,
    )


def settings() -> ReleaseSettings:
    if _state.settings is None:
        _state.settings = ReleaseSettings.from_env()
    return _state.settings


def _dynamodb() -> Any:
    if _state.dynamodb is None:
        import boto3

        _state.dynamodb = boto3.client("dynamodb")
    return _state.dynamodb


def store() -> SizingStore:
    return SizingStore(settings().table_name, client=_dynamodb())


def registry() -> ModelRegistry:
    return ModelRegistry(settings().table_name, client=_dynamodb())


def watches() -> WatchService:
    return WatchService(store(), registry().catalog)


def _secret(name: str) -> str:
    from aws_lambda_powertools.utilities import parameters

    value = parameters.get_secret(name, max_age=SECRET_MAX_AGE_S)
    if not isinstance(value, str) or not value:
        raise Unavailable("a configured secret is empty", [Problem("secret", "empty")])
    return value


def hub() -> HubClient:
    if _state.hub is None:
        s = settings()
        token = _secret(s.hub_token_secret) if s.hub_token_secret else None
        _state.hub = HubClient(s.hub_url, token=token)
    return _state.hub


def _slack_poster() -> SlackPoster | None:
    if _state.slack_poster is not None:
        return _state.slack_poster
    secret_id = settings().slack_secret_id
    if not secret_id:
        return None

    def bot_token() -> str:
        # the Slack bot's own secret reader (JSON {signing_secret, bot_token}, cached, never logged)
        from sizing.slack.secrets import SlackSecrets

        return SlackSecrets(secret_id, max_age_s=SECRET_MAX_AGE_S).bot_token().get_secret_value()

    return WebClientSlackPoster(bot_token, base_url=settings().slack_api_url)


def notifiers() -> list[Notifier]:
    out: list[Notifier] = [EventBridgeNotifier(settings().event_bus_name, client=_state.events)]
    poster = _slack_poster()
    if poster is not None:
        out.append(SlackNotifier(poster))
    return out


def idempotency_layer() -> DynamoDBPersistenceLayer:
    if _state.idempotency is None:
        from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

        _state.idempotency = DynamoDBPersistenceLayer(
            table_name=settings().table_name,
            key_attr="PK",
            sort_key_attr="SK",
            static_pk_value=IDEMPOTENCY_PK,
            expiry_attr="expires_at",
            boto3_client=_dynamodb(),
        )
    return _state.idempotency


def release_service(lambda_context: Any = None) -> ReleaseService:
    s = settings()
    sizing_store = store()

    def runs(catalog: Catalog) -> RunsService:
        return RunsService(sizing_store, s.state_machine_arn, sfn_client=_state.sfn, catalog=catalog)

    bus = EventBridgeNotifier(s.event_bus_name, client=_state.events)
    return ReleaseService(
        registry=registry(),
        watches=WatchService(sizing_store, registry().catalog),
        runs=runs,
        notifiers=notifiers(),
        hub=hub,
        idempotency=idempotency_layer(),
        idempotency_ttl_s=s.idempotency_ttl_s,
        lambda_context=lambda_context,
        reject=bus.reject,
        queue=WatchQueue(s.release_queue_url, client=_state.sqs) if s.release_queue_url else None,
    )


def fanout_consumer(lambda_context: Any = None) -> FanoutConsumer:
    """The fan-out function's consumer over the same release service (its queue is not used there)."""
    return FanoutConsumer(release_service(lambda_context), lambda_context)


def run_poll(max_emits: int | None = None) -> PollReport:
    s = settings()
    publish = BusPublisher(s.event_bus_name, client=_state.events)
    kwargs = {"max_emits": max_emits} if max_emits else {}
    return poll(hub(), list(watches().all()), SeenState(s.table_name, client=_dynamodb()), publish, **kwargs)


def init_environment(handler: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    """Decorator: parse the environment before the first event (a missing variable fails the cold start)."""

    @functools.wraps(handler)
    def wrapper(event: Any, context: Any) -> Any:
        settings()
        return handler(event, context)

    return wrapper
