"""The Slack bot's logic, one method per handler: a slash command (verify, parse, acknowledge, hand off), the
asynchronous estimate (estimate, post Block Kit to the response_url), an interaction ("Measure these" starts a
run through `RunsService`, once per button) and a finished run (post the measured ranking in the thread).

Everything AWS- or Slack-facing is injected (secrets, poster, replay guard, invoker, runs service, store,
idempotency layer), so tests run the same code against moto and a fake Slack API on loopback."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import parse_qs

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import BotoCoreError, ClientError
from pydantic import Field, SecretStr, ValidationError

from sizing.base.errors import InvalidInput, NotFound, SizingError, Unavailable
from sizing.base.observability import logger, metrics
from sizing.base.strict import Lenient, Strict
from sizing.learn.drift import slack_text
from sizing.orchestrate.events import RunCompletedDetail
from sizing.results import Architecture, EstimateResult
from sizing.slack import blocks
from sizing.slack.client import Message, SlackPoster
from sizing.slack.grammar import parse_command
from sizing.slack.verify import ReplayGuard, Unauthorized, verify_request
from sizing.store import SlackThread
from sizing.upgrade import upgrade_result
from sizing.workload.parse import parse_spec
from sizing.workload.spec import WorkloadSpec

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import BasePersistenceLayer

    from sizing.catalog import Catalog
    from sizing.service.runs import RunsService
    from sizing.store import SizingStore

#: Form bodies from Slack are small (a command's text is at most 4,000 characters; an interaction payload with
#: our message's blocks a few KB); anything above 64 KiB is not from our app and is refused unread.
MAX_BODY_BYTES = 64 * 1024


class Secrets(Protocol):
    def signing_secret(self) -> SecretStr: ...

    def bot_token(self) -> SecretStr: ...


class _SlackPayload(Lenient):
    """Slack adds fields to its payloads over time (api_app_id, is_enterprise_install, ...): what is not read is
    ignored rather than genuine requests refused."""


class SlashCommand(_SlackPayload):
    """The form Slack posts for `/sizing ...` (api.slack.com/interactivity/slash-commands)."""

    command: str = "/sizing"
    text: str = ""
    response_url: str = Field(pattern=r"^https?://", max_length=2048)
    channel_id: str = Field(default="", max_length=64)
    user_id: str = Field(default="", max_length=64)
    team_id: str = Field(default="", max_length=64)


class _Ref(_SlackPayload):
    id: str = Field(default="", max_length=64)


class _Container(_SlackPayload):
    message_ts: str = Field(default="", max_length=64)
    channel_id: str = Field(default="", max_length=64)


class _MessageRef(_SlackPayload):
    ts: str = Field(default="", max_length=64)


class _Action(_SlackPayload):
    action_id: str = ""
    block_id: str = Field(default="", max_length=255)
    value: str = Field(default="", max_length=2000)
    action_ts: str = Field(default="", max_length=64)


class BlockActions(_SlackPayload):
    """A `block_actions` interaction (api.slack.com/reference/interaction-payloads/block-actions-payload): a
    button clicked in one of our messages."""

    type: Literal["block_actions"]
    user: _Ref = Field(default_factory=_Ref)
    channel: _Ref | None = None
    container: _Container = Field(default_factory=_Container)
    message: _MessageRef | None = None
    response_url: str = Field(default="", max_length=2048)
    trigger_id: str = Field(default="", max_length=128)
    actions: list[_Action] = Field(default_factory=list, max_length=25)


class EstimateJob(Strict):
    """What the command handler hands the asynchronous worker."""

    raw_spec: dict[str, Any]
    response_url: str = Field(pattern=r"^https?://", max_length=2048)
    channel: str = ""
    user: str = ""


@dataclass
class SlackRequest:
    """An HTTP request as Slack sent it: the raw body (signed as is) and the headers."""

    body: str
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_apigw(cls, event: Mapping[str, Any]) -> SlackRequest:
        """From an API Gateway REST (proxy) event; a base64 body is decoded (the signature covers the bytes)."""
        raw = event.get("body") or ""
        if event.get("isBase64Encoded"):
            raw = base64.b64decode(raw).decode("utf-8", errors="replace")
        headers = {str(k): str(v) for k, v in (event.get("headers") or {}).items() if v is not None}
        return cls(body=raw, headers=headers)


@dataclass
class SlackResponse:
    """What the HTTP handler answers Slack: a status and an optional JSON body (an ephemeral message)."""

    status: int
    body: dict[str, Any] | None = None

    def to_apigw(self) -> dict[str, Any]:
        body = "" if self.body is None else json.dumps(self.body)
        return {"statusCode": self.status, "headers": {"Content-Type": "application/json"}, "body": body}

    @classmethod
    def ephemeral(cls, message: Message) -> SlackResponse:
        return cls(200, {"response_type": "ephemeral", "text": message.text, "blocks": message.blocks_json()})


Invoker = Callable[[EstimateJob], None]


class LambdaInvoker:
    """Invokes the estimate worker asynchronously (InvocationType=Event): the command answers at once."""

    def __init__(self, function_name: str, client: Any = None) -> None:
        self.function_name = function_name
        self._client = client

    def __call__(self, job: EstimateJob) -> None:

        if self._client is None:
            import boto3

            self._client = boto3.client("lambda")
        try:
            self._client.invoke(
                FunctionName=self.function_name,
                InvocationType="Event",
                Payload=job.model_dump_json().encode(),
            )
        except (ClientError, BotoCoreError):
            logger.exception("could not invoke the estimate worker")
            raise Unavailable("the estimate could not be started; try again in a minute") from None


def _count(name: str) -> None:
    # Outside Lambda (`sizing serve`, benchmarks) no namespace may be configured, and Powertools refuses to
    # flush metrics without one: count only where they can be published.
    if metrics.namespace:
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=1)


def _error_text(error: Any) -> str | None:
    if isinstance(error, dict):
        return f"{error.get('Error', 'error')}: {error.get('Cause', '')}".strip(": ")
    return str(error) if error else None


def _form(body: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}


class SlackBot:
    def __init__(
        self,
        *,
        secrets: Secrets,
        poster: SlackPoster,
        replay_guard: ReplayGuard,
        invoker: Invoker | None = None,
        runs: Callable[[], RunsService] | None = None,
        store: Callable[[], SizingStore] | None = None,
        idempotency: Callable[[str], BasePersistenceLayer] | None = None,
        catalog: Callable[[], Catalog] | None = None,
        report_base_url: str | None = None,
        estimate_reports: Callable[[dict[str, Any]], str | None] | None = None,
        run_budget_usd: float | None = None,
        measure_allowed: frozenset[str] = frozenset(),
        idempotency_ttl_s: int = 24 * 3600,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.secrets = secrets
        self.poster = poster
        self.replay_guard = replay_guard
        self.invoker: Invoker = invoker or self.estimate
        self._runs = runs
        self._store = store
        self._idempotency = idempotency
        self._catalog = catalog
        self.report_base_url = report_base_url.rstrip("/") if report_base_url else None
        self.estimate_reports = estimate_reports
        self.run_budget_usd = run_budget_usd
        self.measure_allowed = measure_allowed
        self.idempotency_ttl_s = idempotency_ttl_s
        self.now = now
        #: The invocation's Lambda context, when a handler sets it: idempotency records then expire with it.
        self.lambda_context: Any = None

    # --- shared -------------------------------------------------------------------------------------------
    def catalog(self) -> Catalog:
        if self._catalog is None:
            # deferred: the catalog's pydantic models cost a Slack cold start that reads no catalog (the
            # acknowledgement, the notifier) ~50 ms (-X importtime)
            from sizing.catalog import load_catalog

            return load_catalog()
        return self._catalog()

    def verify(self, request: SlackRequest) -> None:
        if len(request.body.encode()) > MAX_BODY_BYTES:
            raise Unauthorized("request body too large for a Slack request", code="unauthorized")
        verify_request(
            request.body,
            request.headers,
            self.secrets.signing_secret(),
            replay_guard=self.replay_guard,
            now=self.now,
        )

    def report_url(self, run_id: str) -> str | None:
        return f"{self.report_base_url}/runs/{run_id}/report" if self.report_base_url else None

    def understand(self, text: str) -> tuple[WorkloadSpec, dict[str, Any]] | Message:
        """The text as a validated spec and its raw form, or the reply that explains what is wrong."""
        parsed = parse_command(text)
        if parsed.kind == "help":
            return blocks.help_message()
        if parsed.kind == "usage":
            return blocks.usage_message(parsed.problems, text=parsed.text)
        try:
            catalog = self.catalog()
            spec = parse_spec(parsed.raw_spec, catalog=catalog)
            catalog.model(spec.model, field_name="model")
        except NotFound as exc:
            suggestions = exc.details.get("suggestions") or []
            hint = (
                " Did you mean " + ", ".join(f"`{blocks.escape(s)}`" for s in suggestions) + "?"
                if suggestions
                else " `sizing catalog list` shows the models we know."
            )
            return blocks.usage_message(
                [f"I don't know the model `{blocks.escape(parsed.raw_spec['model'])}`.{hint}"],
                text=parsed.text,
            )
        except InvalidInput as exc:
            problems = [blocks.escape(str(p)) for p in exc.problems] or [blocks.escape(exc.message)]
            return blocks.usage_message(problems, text=parsed.text)
        return spec, parsed.raw_spec

    # --- POST /slack/commands -----------------------------------------------------------------------------
    def command(self, request: SlackRequest) -> SlackResponse:
        """Verify, parse, and either answer at once (help, usage) or acknowledge and hand off the estimate."""
        self.verify(request)
        form = _form(request.body)
        if form.get("ssl_check") == "1":
            return SlackResponse(200)
        try:
            cmd = SlashCommand.model_validate(form)
        except ValidationError:
            return SlackResponse.ephemeral(
                blocks.notice_message("That request had no response_url; try again.")
            )
        understood = self.understand(cmd.text)
        if isinstance(understood, Message):
            _count("SlackUsageReplies")
            return SlackResponse.ephemeral(understood)
        spec, raw = understood
        model_id = self.catalog().model(spec.model).id
        job = EstimateJob(
            raw_spec=raw, response_url=cmd.response_url, channel=cmd.channel_id, user=cmd.user_id
        )
        self.invoker(job)
        _count("SlackEstimatesRequested")
        logger.info("estimate handed off", extra={"channel": cmd.channel_id, "model": model_id})
        return SlackResponse.ephemeral(blocks.working_message(blocks.describe_spec(spec, model_id)))

    # --- the asynchronous worker --------------------------------------------------------------------------
    def estimate(self, job: EstimateJob) -> None:
        """Estimate the workload and post the top architectures to the response_url (in the channel)."""
        from sizing.plan.search import estimate

        try:
            catalog = self.catalog()
            spec = parse_spec(job.raw_spec, catalog=catalog)
            result = estimate(spec, top=blocks.TOP_SHOWN, catalog=catalog, slo_cost=True)
            message = blocks.estimate_message(
                result, spec, job.raw_spec, user=job.user or None, report_url=self._publish(result)
            )
        except SizingError as exc:
            self.poster.respond(
                job.response_url, blocks.usage_message([blocks.escape(str(exc))]), response_type="ephemeral"
            )
            return
        except Exception:
            logger.exception("estimate failed")
            self.poster.respond(
                job.response_url,
                blocks.notice_message("Sorry, the estimate failed on our side; it has been logged."),
                response_type="ephemeral",
            )
            raise
        self.poster.respond(job.response_url, message, response_type="in_channel")
        _count("SlackEstimatesPosted")

    def _publish(self, result: EstimateResult) -> str | None:
        """The estimate's report link, when reports are stored; an estimate without its report is still an
        answer, so a storage failure only drops the link."""
        if self.estimate_reports is None or not result.architectures:
            return None
        try:
            return self.estimate_reports(result.document())
        except Exception:
            logger.exception("could not publish the estimate's report")
            return None

    # --- POST /slack/interactions -------------------------------------------------------------------------
    def interaction(self, request: SlackRequest) -> SlackResponse:
        """The "Measure these" button: start one run per button (a second click answers the first run's id)."""
        self.verify(request)
        try:
            payload = BlockActions.model_validate_json(_form(request.body).get("payload", ""))
        except ValidationError:
            return SlackResponse(200)  # another kind of interaction (a view, a shortcut): not ours to handle
        action = next((a for a in payload.actions if a.action_id == blocks.MEASURE_ACTION_ID), None)
        if action is None:
            return SlackResponse(200)  # the report link button also reports its clicks; nothing to do
        channel = (payload.channel.id if payload.channel else "") or payload.container.channel_id
        message_ts = payload.container.message_ts or (payload.message.ts if payload.message else "")
        user = payload.user.id
        response_url = payload.response_url
        try:
            measure = blocks.MeasureAction.model_validate_json(action.value)
        except ValidationError:
            return SlackResponse(400, {"message": "the button carries no workload"})
        thread = SlackThread(
            channel=channel or "unknown",
            thread_ts=message_ts or None,
            user=user or None,
            response_url=response_url or None,
        )
        if self.measure_allowed and not ({user, channel} & self.measure_allowed):
            logger.info("measured run not allowed here", extra={"channel": channel})
            self._tell(
                thread,
                blocks.notice_message(
                    "Measured runs cost money and are limited to some people and channels here;"
                    " ask your platform team to start this one."
                ),
            )
            return SlackResponse(200)
        key = f"{channel}:{message_ts}:{action.block_id}:{blocks.MEASURE_ACTION_ID}"
        click = action.action_ts or payload.trigger_id
        from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError

        try:
            started = self._start_once(key, click, measure, thread)
        except IdempotencyAlreadyInProgressError:
            # a double click: the first click is starting the run right now and will announce it
            self._tell(
                thread, blocks.notice_message("Already starting these; the run is announced in the thread.")
            )
            return SlackResponse(200)
        except SizingError as exc:
            logger.info("run not started", extra={"reason": exc.code})
            self._tell(thread, blocks.notice_message(f"The run could not be started: {exc.message}"))
            return SlackResponse(200)
        if started["click"] == click:
            self._announce(
                thread,
                blocks.run_started_message(
                    started["run_id"],
                    len(measure.ids or []) or measure.top_k,
                    user or None,
                    listed=bool(measure.ids),
                ),
            )
        else:
            self._tell(thread, blocks.notice_message(f"Already measuring these: run {started['run_id']}."))
        return SlackResponse(200)

    def _start_once(
        self, key: str, click: str, measure: blocks.MeasureAction, thread: SlackThread
    ) -> dict[str, str]:
        def start(payload: dict[str, Any]) -> dict[str, str]:
            assert self._runs is not None, "the Slack bot was built without a runs service"
            run = self._runs().create_run(
                measure.spec,
                top_k=measure.top_k,
                architecture_ids=measure.ids,
                budget_usd=self.run_budget_usd,
                source="slack",
                slack=thread,
                field_prefix="spec",
            )
            logger.info("run started from Slack", extra={"run_id": run.run_id})
            _count("SlackRunsStarted")
            return {"run_id": run.run_id, "status": run.status, "click": payload["click"]}

        if self._idempotency is None:
            return start({"key": key, "click": click})
        from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function

        config = IdempotencyConfig(event_key_jmespath="key", expires_after_seconds=self.idempotency_ttl_s)
        if self.lambda_context is not None:
            config.register_lambda_context(self.lambda_context)
        once = idempotent_function(
            data_keyword_argument="payload",
            persistence_store=self._idempotency("IDEMPOTENCY#slack-measure"),
            config=config,
        )(start)
        result: dict[str, str] = once(payload={"key": key, "click": click})
        return result

    def _announce(self, thread: SlackThread, message: Message) -> None:
        """In the thread for everyone (bot token); ephemeral through the response_url when the bot cannot post."""
        if thread.thread_ts:
            try:
                self.poster.post(thread.channel, message, thread_ts=thread.thread_ts)
                return
            except Unavailable:
                pass
        self._tell(thread, message)

    def _tell(self, thread: SlackThread, message: Message) -> None:
        if thread.response_url:
            try:
                self.poster.respond(thread.response_url, message, response_type="ephemeral")
            except Unavailable:
                logger.warning("could not answer the interaction", extra={"channel": thread.channel})

    # --- EventBridge SizingRunCompleted -------------------------------------------------------------------
    def run_completed(self, detail: Mapping[str, Any]) -> bool:
        """Post the measured ranking (or why the run ended) to the run's Slack thread. False when the run did
        not come from Slack. Once per run and status, however often EventBridge delivers the event."""
        event = RunCompletedDetail.model_validate(detail)
        assert self._store is not None, "the Slack bot was built without a store"
        try:
            run = self._store().get_run(event.run_id)
        except NotFound:
            logger.warning("completed run not in the store", extra={"run_id": event.run_id})
            return False
        if run.slack is None:
            logger.info("run has no Slack thread", extra={"run_id": run.run_id})
            return False
        status = event.status or run.status

        # the idempotency wrapper hands the work its payload; the run is already bound
        def notify(payload: dict[str, Any]) -> dict[str, str]:  # noqa: ARG001
            assert run.slack is not None
            if status == "SUCCEEDED":
                message = self._measured(run.run_id, run.spec)
            else:
                message = blocks.run_ended_message(
                    run.run_id, status, run.error or event.reason or event.error
                )
            ts = self.poster.post(run.slack.channel, message, thread_ts=run.slack.thread_ts)
            _count("SlackRunsNotified")
            return {"ts": ts}

        if self._idempotency is None:
            notify({})
            return True
        from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function

        config = IdempotencyConfig(
            event_key_jmespath="[run_id, status]", expires_after_seconds=self.idempotency_ttl_s
        )
        if self.lambda_context is not None:
            config.register_lambda_context(self.lambda_context)
        idempotent_function(
            data_keyword_argument="payload",
            persistence_store=self._idempotency("IDEMPOTENCY#slack-notify"),
            config=config,
        )(notify)(payload={"run_id": run.run_id, "status": status})
        return True

    def _measured(self, run_id: str, raw_spec: dict[str, Any]) -> Message:
        assert self._store is not None
        store = self._store()
        ranking = store.get_ranking(run_id) or {}
        try:
            spec: WorkloadSpec | None = parse_spec(raw_spec)
        except SizingError:
            spec = None
        stored = ranking.get("architectures")
        docs = stored if isinstance(stored, list) else store.get_architectures(run_id)
        return blocks.measured_message(
            run_id, _ranked(docs, spec), spec, self.report_url(run_id), drift=slack_text(ranking)
        )


def _ranked(docs: list[Any], spec: WorkloadSpec | None) -> list[Architecture]:
    """The run's first ranked architectures, typed: the stored ranking's list (a ranking stored by an earlier
    release lists them) or the run's architecture items, read once by `sizing.upgrade` (an architecture that
    names no model serves the workload's)."""
    workload = {"model": spec.model} if spec is not None else {}
    shown = docs[: blocks.TOP_SHOWN]
    return upgrade_result({"workload": workload, "architectures": shown}, "run's ranking").architectures


def answer(handle: Callable[[SlackRequest], SlackResponse], request: SlackRequest) -> SlackResponse:
    """Run a request handler and map its errors once: not from Slack → 401 with a coarse reason (no secret,
    no signature), and nothing started; any other product error → an ephemeral sentence, never a stack trace."""
    try:
        return handle(request)
    except Unauthorized as exc:
        logger.warning("refused a Slack request", extra={"reason": exc.message})
        _count("SlackRequestsRefused")
        return SlackResponse(401, {"message": exc.message})
    except SizingError as exc:
        logger.warning("Slack request failed", extra={"error": exc.code})
        return SlackResponse.ephemeral(blocks.notice_message(f"Sorry: {exc.message}"))
    except (ClientError, BotoCoreError):
        logger.exception("an AWS dependency failed")
        return SlackResponse.ephemeral(
            blocks.notice_message("Sorry: something on our side failed; try again.")
        )
