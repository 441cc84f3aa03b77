"""The release functions' services (`sizing.base.wiring`): settings and AWS-backed clients in one frozen bundle, built
on first use (never at import). Tests give their own with `services.override(build(...))` (moto clients, a fake
Slack poster, a local Hub)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from sizing.base.errors import Problem, Unavailable
from sizing.base.wiring import Wiring, idempotency_layer
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
from sizing.service.runs import RunsService
from sizing.slack.secrets import SlackSecrets
from sizing.store import SizingStore

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    from sizing.catalog import Catalog

#: Idempotency records of releases share the table under their own partition key and carry its TTL attribute.
IDEMPOTENCY_PK = "IDEMPOTENCY#releases"
#: Secrets are cached for five minutes (Powertools Parameters max_age): a rotated token is picked up quickly,
#: and a burst of releases reads the secret once.
SECRET_MAX_AGE_S = 300


@dataclass(frozen=True)
class ReleaseServices:
    """What the release functions use. The boto3 clients are made lazily when None; `slack_poster` and
    `given_hub` replace the Slack Web API poster and the Hugging Face Hub client (tests, benchmarks)."""

    settings: ReleaseSettings
    dynamodb: Any = None
    sfn: Any = None
    events: Any = None
    sqs: Any = None
    slack_poster: SlackPoster | None = None
    given_hub: HubClient | None = None

    @cached_property
    def client(self) -> Any:
        """The DynamoDB client every table adapter of the release functions shares."""
        if self.dynamodb is not None:
            return self.dynamodb
        import boto3

        return boto3.client("dynamodb")

    @cached_property
    def store(self) -> SizingStore:
        return SizingStore(self.settings.table_name, client=self.client)

    @cached_property
    def registry(self) -> ModelRegistry:
        return ModelRegistry(self.settings.table_name, client=self.client)

    @cached_property
    def watches(self) -> WatchService:
        # the release functions write the registry: they read it afresh each time (no container cache)
        return WatchService(self.store, self.registry.catalog)

    @cached_property
    def hub(self) -> HubClient:
        """The Hub client; its token secret is read on first use only (a config sent inline never needs it)."""
        if self.given_hub is not None:
            return self.given_hub
        s = self.settings
        token = _secret(s.hub_token_secret) if s.hub_token_secret else None
        return HubClient(s.hub_url, token=token)

    @cached_property
    def notifiers(self) -> list[Notifier]:
        out: list[Notifier] = [EventBridgeNotifier(self.settings.event_bus_name, client=self.events)]
        poster = self.slack_poster or _bot_poster(self.settings)
        if poster is not None:
            out.append(SlackNotifier(poster))
        return out

    @cached_property
    def idempotency(self) -> DynamoDBPersistenceLayer:
        return idempotency_layer(self.settings.table_name, IDEMPOTENCY_PK, self.client)

    def release_service(self, lambda_context: Any = None) -> ReleaseService:
        s = self.settings

        def runs(catalog: Catalog) -> RunsService:
            return RunsService(self.store, s.state_machine_arn, sfn_client=self.sfn, catalog=catalog)

        bus = EventBridgeNotifier(s.event_bus_name, client=self.events)
        return ReleaseService(
            registry=self.registry,
            watches=self.watches,
            runs=runs,
            notifiers=self.notifiers,
            hub=lambda: self.hub,
            idempotency=self.idempotency,
            idempotency_ttl_s=s.idempotency_ttl_s,
            lambda_context=lambda_context,
            reject=bus.reject,
            queue=WatchQueue(s.release_queue_url, client=self.sqs) if s.release_queue_url else None,
        )


def _secret(name: str) -> str:
    from aws_lambda_powertools.utilities import parameters

    value = parameters.get_secret(name, max_age=SECRET_MAX_AGE_S)
    if not isinstance(value, str) or not value:
        raise Unavailable("a configured secret is empty", [Problem("secret", "empty")])
    return value


def _bot_poster(s: ReleaseSettings) -> SlackPoster | None:
    """The Slack bot's own client over its secret and `SLACK_API_URL` (None: no Slack configured)."""
    secret_id = s.slack_secret_id
    if not secret_id:
        return None

    def bot_token() -> str:
        # the Slack bot's own secret reader (JSON {signing_secret, bot_token}, cached, never logged)
        return SlackSecrets(secret_id, max_age_s=SECRET_MAX_AGE_S).bot_token().get_secret_value()

    return WebClientSlackPoster(bot_token, base_url=s.slack_api_url)


def build(
    settings: ReleaseSettings | None = None,
    *,
    dynamodb: Any = None,
    sfn: Any = None,
    events: Any = None,
    sqs: Any = None,
    slack_poster: SlackPoster | None = None,
    hub: HubClient | None = None,
) -> ReleaseServices:
    """The release functions' services: `settings` parsed from the environment when not given."""
    return ReleaseServices(
        settings or ReleaseSettings.from_env(),
        dynamodb=dynamodb,
        sfn=sfn,
        events=events,
        sqs=sqs,
        slack_poster=slack_poster,
        given_hub=hub,
    )


services: Wiring[ReleaseServices] = Wiring(build)


def configure(settings: ReleaseSettings | None = None, **clients: Any) -> None:
    """For hosts that keep one bundle for the process (benchmarks): build from these settings and clients (the
    keywords of `build`) from now on; with no arguments, from the environment again."""
    services.set(lambda: build(settings, **clients))


# --- what the handlers call -----------------------------------------------------------------------------------
def settings() -> ReleaseSettings:
    return services().settings


def registry() -> ModelRegistry:
    return services().registry


def watches() -> WatchService:
    return services().watches


def hub() -> HubClient:
    return services().hub


def notifiers() -> list[Notifier]:
    return services().notifiers


def release_service(lambda_context: Any = None) -> ReleaseService:
    return services().release_service(lambda_context)


def fanout_consumer(lambda_context: Any = None) -> FanoutConsumer:
    """The fan-out function's consumer over the same release service (its queue is not used there)."""
    return FanoutConsumer(release_service(lambda_context), lambda_context)


def run_poll(max_emits: int | None = None) -> PollReport:
    svc = services()
    s = svc.settings
    publish = BusPublisher(s.event_bus_name, client=svc.events)
    kwargs = {"max_emits": max_emits} if max_emits else {}
    return poll(
        svc.hub, list(svc.watches.all()), SeenState(s.table_name, client=svc.client), publish, **kwargs
    )
