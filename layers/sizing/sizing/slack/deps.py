"""The Slack functions' dependencies, built lazily on first use from `SlackSettings` (never at import) and
replaceable with `configure()` (tests, `sizing serve`)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sizing.slack.bot import Invoker, LambdaInvoker, Secrets, SlackBot
from sizing.slack.client import SlackPoster
from sizing.slack.secrets import SlackSecrets
from sizing.slack.settings import SlackSettings
from sizing.slack.verify import DynamoReplayGuard

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    from sizing.catalog import Catalog
    from sizing.releases.catalog import LiveCatalog
    from sizing.service.runs import RunsService
    from sizing.store import SizingStore


@dataclass
class _State:
    settings: SlackSettings | None = None
    dynamodb: Any = None
    sfn: Any = None
    secretsmanager: Any = None
    lambda_client: Any = None
    s3: Any = None
    invoker: Invoker | None = None
    bot: SlackBot | None = None
    store: SizingStore | None = None
    runs: RunsService | None = None
    layers: dict[str, DynamoDBPersistenceLayer] | None = None
    secrets: Secrets | None = None
    poster: SlackPoster | None = None
    catalog: LiveCatalog | None = None


_state = _State()


def configure(
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
) -> None:
    """Replace settings and/or clients (an `invoker` replaces the asynchronous Lambda invoke, e.g. inline).
    `sizing serve` also gives its runs service, fixed secrets (a local signing secret) and a local sink for
    messages."""
    global _state
    _state = _State(
        settings=settings,
        dynamodb=dynamodb,
        sfn=sfn,
        secretsmanager=secretsmanager,
        lambda_client=lambda_client,
        s3=s3,
        invoker=invoker,
        runs=runs,
        secrets=secrets,
        poster=poster,
    )


def settings() -> SlackSettings:
    if _state.settings is None:
        _state.settings = SlackSettings.from_env()
    return _state.settings


def store() -> SizingStore:
    if _state.store is None:
        from sizing.store import SizingStore

        _state.store = SizingStore(settings().table_name, client=_state.dynamodb)
    return _state.store


def catalog() -> Catalog:
    """The shipped catalog plus the models added by releases (`LiveCatalog`: rebuilt when a release lands), so
    a model announced a minute ago can be estimated and measured from Slack."""
    if _state.catalog is None:
        from sizing.releases.catalog import LiveCatalog, ModelRegistry

        _state.catalog = LiveCatalog(ModelRegistry(settings().table_name, client=store().client))
    return _state.catalog()


def runs() -> RunsService:
    if _state.runs is None:
        from sizing.service.runs import RunsService

        _state.runs = RunsService(
            store(), settings().state_machine_arn, sfn_client=_state.sfn, catalog=catalog
        )
    return _state.runs


def idempotency_layer(static_pk: str) -> DynamoDBPersistenceLayer:
    """Idempotency records in the sizing table under their own partition key, expiring through its TTL."""
    if _state.layers is None:
        _state.layers = {}
    if static_pk not in _state.layers:
        from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

        _state.layers[static_pk] = DynamoDBPersistenceLayer(
            table_name=settings().table_name,
            key_attr="PK",
            sort_key_attr="SK",
            static_pk_value=static_pk,
            expiry_attr="expires_at",
            boto3_client=store().client,
        )
    return _state.layers[static_pk]


def bot() -> SlackBot:
    if _state.bot is None:
        s = settings()
        secrets: Secrets = _state.secrets or SlackSecrets(
            s.secret_id, max_age_s=s.secret_max_age_s, client=_state.secretsmanager
        )
        invoker = _state.invoker
        if invoker is None and s.worker_function:
            invoker = LambdaInvoker(s.worker_function, client=_state.lambda_client)
        _state.bot = SlackBot(
            secrets=secrets,
            poster=_state.poster or SlackPoster(s.slack_api_url, secrets.bot_token),
            replay_guard=DynamoReplayGuard(s.table_name, client=store().client),
            invoker=invoker,
            runs=runs,
            store=store,
            idempotency=idempotency_layer,
            catalog=catalog,
            report_base_url=s.report_base_url,
            estimate_reports=estimate_reports(),
            run_budget_usd=s.run_budget_usd,
            measure_allowed=s.measure_allowlist(),
            idempotency_ttl_s=s.idempotency_ttl_s,
        )
    return _state.bot


def estimate_reports() -> Callable[[dict[str, Any]], str | None] | None:
    """Store an estimate's report in the reports bucket and return a presigned link (None: no bucket set)."""
    s = settings()
    if not s.report_bucket:
        return None
    bucket, ttl_s, client = s.report_bucket, s.report_link_ttl_s, _state.s3

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
    from sizing.slack.bot import SlackRequest, answer

    name = ROUTES.get(str(event.get("path") or "").rstrip("/"))
    if name is None or event.get("httpMethod") != "POST":
        return None
    handle = getattr(bot(), name)
    return answer(handle, SlackRequest.from_apigw(event)).to_apigw()


def background_invoker() -> Invoker:
    """Runs the estimate worker in a daemon thread (for `sizing serve`: the acknowledgement must not wait)."""
    import threading

    from sizing.slack.bot import EstimateJob

    def invoke(job: EstimateJob) -> None:
        threading.Thread(target=bot().estimate, args=(job,), name="slack-estimate", daemon=True).start()

    return invoke
