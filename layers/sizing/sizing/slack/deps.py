"""The Slack functions' services (`sizing.base.wiring`): settings and clients in one frozen bundle, built on first use
from `SlackSettings` (never at import). Tests give their own with `services.override(build(...))`; `sizing
serve` builds its own with `configure(...)`."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from sizing.base.wiring import Wiring
from sizing.base.wiring import idempotency_layer as persistence_layer
from sizing.slack.bot import EstimateJob, Invoker, LambdaInvoker, Secrets, SlackBot, SlackRequest, answer
from sizing.slack.client import SlackPoster
from sizing.slack.secrets import SlackSecrets
from sizing.slack.settings import SlackSettings
from sizing.slack.verify import DynamoReplayGuard
from sizing.store import SizingStore

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    from sizing.catalog import Catalog
    from sizing.releases.catalog import LiveCatalog
    from sizing.service.runs import RunsService


@dataclass(frozen=True)
class SlackServices:
    """What the Slack functions use. The boto3 clients are made lazily when None; `invoker` replaces the
    asynchronous Lambda invoke of the worker (inline, or a thread under `sizing serve`); `given_runs`,
    `secrets` and `poster` are a host's own (`sizing serve`: its runs service, a local signing secret, a local
    sink for messages)."""

    settings: SlackSettings
    dynamodb: Any = None
    sfn: Any = None
    secretsmanager: Any = None
    lambda_client: Any = None
    s3: Any = None
    invoker: Invoker | None = None
    given_runs: RunsService | None = None
    secrets: Secrets | None = None
    poster: SlackPoster | None = None
    #: Seconds between checks of the release registry (`releases.catalog.CHECK_EVERY_S` when None).
    catalog_check_s: float | None = None

    @cached_property
    def store(self) -> SizingStore:
        return SizingStore(self.settings.table_name, client=self.dynamodb)

    @cached_property
    def live_catalog(self) -> LiveCatalog:
        """The shipped catalog plus the models added by releases (rebuilt when a release lands), so a model
        announced a minute ago can be estimated and measured from Slack."""
        # deferred, as `runs` below: the release and run services (pydantic results) cost a Slack cold start
        # that needs neither (the acknowledgement, the notifier) ~100 ms (-X importtime)
        from sizing.releases.catalog import LiveCatalog

        return LiveCatalog.of_table(self.settings.table_name, self.store.client, self.catalog_check_s)

    @cached_property
    def runs(self) -> RunsService:
        if self.given_runs is not None:
            return self.given_runs
        from sizing.service.runs import RunsService

        return RunsService(
            self.store, self.settings.state_machine_arn, sfn_client=self.sfn, catalog=self.live_catalog
        )

    @cached_property
    def _layers(self) -> dict[str, DynamoDBPersistenceLayer]:
        return {}

    def idempotency(self, static_pk: str) -> DynamoDBPersistenceLayer:
        """Idempotency records in the sizing table under their own partition key, expiring through its TTL."""
        if static_pk not in self._layers:
            self._layers[static_pk] = persistence_layer(
                self.settings.table_name, static_pk, self.store.client
            )
        return self._layers[static_pk]

    @cached_property
    def bot(self) -> SlackBot:
        s = self.settings
        secrets: Secrets = self.secrets or SlackSecrets(
            s.secret_id, max_age_s=s.secret_max_age_s, client=self.secretsmanager
        )
        invoker = self.invoker
        if invoker is None and s.worker_function:
            invoker = LambdaInvoker(s.worker_function, client=self.lambda_client)
        return SlackBot(
            secrets=secrets,
            poster=self.poster or SlackPoster(s.slack_api_url, secrets.bot_token),
            replay_guard=DynamoReplayGuard(s.table_name, client=self.store.client),
            invoker=invoker,
            runs=lambda: self.runs,
            store=lambda: self.store,
            idempotency=self.idempotency,
            catalog=self.live_catalog,
            report_base_url=s.report_base_url,
            estimate_reports=estimate_reports(s, self.s3),
            run_budget_usd=s.run_budget_usd,
            measure_allowed=s.measure_allowlist(),
            idempotency_ttl_s=s.idempotency_ttl_s,
        )


def build(
    settings: SlackSettings | None = None,
    *,
    dynamodb: Any = None,
    sfn: Any = None,
    secretsmanager: Any = None,
    lambda_client: Any = None,
    s3: Any = None,
    invoker: Invoker | None = None,
    runs: RunsService | None = None,
    secrets: Secrets | None = None,
    poster: SlackPoster | None = None,
    catalog_check_s: float | None = None,
) -> SlackServices:
    """The Slack functions' services: `settings` parsed from the environment when not given."""
    return SlackServices(
        settings or SlackSettings.from_env(),
        dynamodb=dynamodb,
        sfn=sfn,
        secretsmanager=secretsmanager,
        lambda_client=lambda_client,
        s3=s3,
        invoker=invoker,
        given_runs=runs,
        secrets=secrets,
        poster=poster,
        catalog_check_s=catalog_check_s,
    )


services: Wiring[SlackServices] = Wiring(build)


def configure(settings: SlackSettings | None = None, **clients: Any) -> None:
    """For hosts that keep one bundle for the process (`sizing serve`): build from these settings and clients
    (the keywords of `build`) from now on; with no arguments, from the environment again."""
    services.set(lambda: build(settings, **clients))


# --- what the handlers call -----------------------------------------------------------------------------------
def settings() -> SlackSettings:
    return services().settings


def store() -> SizingStore:
    return services().store


def runs() -> RunsService:
    return services().runs


def catalog() -> Catalog:
    return services().live_catalog()


def idempotency_layer(static_pk: str) -> DynamoDBPersistenceLayer:
    return services().idempotency(static_pk)


def bot() -> SlackBot:
    return services().bot


def estimate_reports(s: SlackSettings, client: Any = None) -> Callable[[dict[str, Any]], str | None] | None:
    """Store an estimate's report in the reports bucket and return a presigned link (None: no bucket set).
    `client`: boto3 S3 (made lazily when None)."""
    if not s.report_bucket:
        return None
    bucket, ttl_s = s.report_bucket, s.report_link_ttl_s

    def publish(result: dict[str, Any]) -> str:
        from sizing.report.storage import ReportStore

        reports = ReportStore(bucket, client=client)
        report_id = f"estimate-{uuid.uuid4().hex}"
        reports.publish(report_id, result)
        return reports.presigned_url(report_id, expires_s=ttl_s)

    return publish


#: The Slack routes of the REST API and the bot method answering each.
ROUTES = {"/slack/commands": "command", "/slack/interactions": "interaction"}


def route(event: dict[str, Any]) -> dict[str, Any] | None:
    """Answer an API Gateway REST event for one of Slack's routes (for `sizing serve`, which runs the API
    resolver for every other path); None when the path is not Slack's."""
    name = ROUTES.get(str(event.get("path") or "").rstrip("/"))
    if name is None or event.get("httpMethod") != "POST":
        return None
    handle = getattr(bot(), name)
    return answer(handle, SlackRequest.from_apigw(event)).to_apigw()


def background_invoker() -> Invoker:
    """Runs the estimate worker in a daemon thread (for `sizing serve`: the acknowledgement must not wait)."""
    import threading

    def invoke(job: EstimateJob) -> None:
        threading.Thread(target=bot().estimate, args=(job,), name="slack-estimate", daemon=True).start()

    return invoke
