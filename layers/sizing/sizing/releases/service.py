"""The release handler's logic: on `ModelReleased`, add the model to the catalog from its config.json, then for
each matching watch estimate it, compare with the watch's current best, start a measured run when asked, notify.

With a fan-out queue (deployed: `RELEASE_QUEUE_URL`), the release only enqueues one `WatchJob` per matching
watch and the fan-out function re-sizes each (`sizing.releases.fanout`); without one (one-off local use) the
same per-watch code runs inline. Each (model, config, watch) is processed at most once (Powertools Idempotency
keyed on the model, the digest of its config.json and the watch), so the same release delivered twice yields
one set of estimates, runs and notifications, while a re-release with a changed config.json re-sizes again. A
config.json that is not a decoder LLM's is rejected with the reason before anything is stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError
from pydantic import Field

from sizing.base.errors import InvalidInput, NotFound, Problem, SizingError, Unavailable
from sizing.base.strict import Strict
from sizing.catalog.hf import model_from_config
from sizing.releases.catalog import BatchCache, ModelRegistry
from sizing.releases.compare import Comparison, compare
from sizing.releases.events import ModelReleased, config_digest, parse_model_released
from sizing.releases.fanout import WatchJob, WatchQueue
from sizing.releases.hub import HubClient, HubError
from sizing.releases.notify import Notifier, ReleaseNote, summary
from sizing.releases.watches import ReleaseWatch, WatchResult, WatchService
from sizing.results import EstimateResult
from sizing.workload.parse import parse_spec

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import BasePersistenceLayer

    from sizing.catalog import Catalog
    from sizing.service.runs import RunsService

#: Architectures estimated per watch and model: the ranking's head is what a comparison and a notification
#: show; 5 keeps the estimate fast and the event small.
TOP = 5
#: Architectures listed in a notification.
NOTE_TOP = 3


class WatchOutcome(Strict):
    """What one watch got from a release."""

    watch_id: str
    model_id: str
    config_digest: str | None = Field(default=None, description="digest of the config.json re-sized against")
    verdict: str | None = None
    headline: str | None = None
    comparison: Comparison | None = None
    run_id: str | None = None
    run_status: str | None = None
    run_skipped: str | None = Field(default=None, description="why no run was started although asked")
    notified: list[str] = Field(default_factory=list)
    notify_errors: list[str] = Field(default_factory=list)
    error: str | None = Field(default=None, description="why this watch could not be re-sized")
    skipped: str | None = Field(default=None, description="why this job had nothing to do (nothing recorded)")


class ReleaseOutcome(Strict):
    """The handler's answer for one event."""

    model_id: str | None
    status: Literal["processed", "rejected"]
    reason: str | None = None
    problems: list[dict[str, str]] = Field(default_factory=list)
    added_to_catalog: bool = False
    config_digest: str | None = None
    enqueued: int = Field(default=0, description="watches queued for the fan-out function to re-size")
    watches: list[WatchOutcome] = Field(default_factory=list)


class ReleaseService:
    """Handles releases. `runs` builds a RunsService over a given catalog (the one that knows the new model);
    `hub` gives the Hub client for configs sent as URLs (called only then, so its token secret is read only
    then); `reject` hears about rejected events; `idempotency` is the persistence layer of the per-(model,
    config, watch) records (None: no deduplication, for one-off local use); `queue` is the fan-out queue (None:
    re-size inline)."""

    def __init__(
        self,
        *,
        registry: ModelRegistry,
        watches: WatchService,
        runs: Callable[[Catalog], RunsService],
        notifiers: list[Notifier],
        hub: Callable[[], HubClient] | None = None,
        idempotency: BasePersistenceLayer | None = None,
        idempotency_ttl_s: int = 7 * 24 * 3600,
        lambda_context: Any = None,
        reject: Callable[[str | None, str, list[Problem]], None] | None = None,
        queue: WatchQueue | None = None,
    ) -> None:
        self.registry = registry
        self.watches = watches
        self._runs = runs
        self.notifiers = notifiers
        self._hub = hub
        self.idempotency = idempotency
        self.idempotency_ttl_s = idempotency_ttl_s
        self.lambda_context = lambda_context
        self._reject = reject
        self.queue = queue

    # --- entry points -------------------------------------------------------------------------------------
    def handle_event(self, event: Any) -> ReleaseOutcome:
        """An EventBridge `ModelReleased` event → outcome. A malformed event or config is rejected (returned,
        not raised: retrying cannot fix it); transient failures raise so the delivery is retried."""
        try:
            release = parse_model_released(event)
        except InvalidInput as exc:
            return self._rejected(exc.details.get("model_id"), exc)
        return self.handle(release)

    def handle(self, release: ModelReleased) -> ReleaseOutcome:
        try:
            config = self._config(release)
            spec = model_from_config(config, release.model_id, source=_source_note(release))
        except InvalidInput as exc:
            return self._rejected(release.model_id, exc)
        digest = config_digest(config)
        self.registry.put(spec, release.source, digest)
        outcome = ReleaseOutcome(
            model_id=spec.id, status="processed", added_to_catalog=True, config_digest=digest
        )
        if self.queue is not None:
            ids = self.watches.matching_ids(spec.id)
            jobs = [WatchJob(model_id=spec.id, config_digest=digest, watch_id=i) for i in ids]
            outcome.enqueued = self.queue.send(jobs)
            return outcome
        watches = self.watches.matching(spec.id)
        jobs = [WatchJob(model_id=spec.id, config_digest=digest, watch_id=w.watch_id) for w in watches]
        catalog = self.registry.catalog()
        cache: dict[str, EstimateResult | None] = {}
        transient: list[str] = []
        for job, watch in zip(jobs, watches, strict=True):
            try:
                outcome.watches.append(self._once(job, watch, lambda: catalog, cache))
            except Unavailable as exc:
                transient.append(f"{watch.watch_id}: {exc.message}")
            except IdempotencyAlreadyInProgressError:
                # another delivery is re-sizing this watch right now (or a timed-out one whose record has not
                # expired yet): leave it to that one, and let this delivery be retried for the rest
                transient.append(f"{watch.watch_id}: being re-sized by another delivery")
        if transient:
            # the finished watches are recorded; a retried delivery redoes only these
            raise Unavailable("some watches could not be re-sized; retry: " + "; ".join(transient))
        return outcome

    # --- steps --------------------------------------------------------------------------------------------
    def _config(self, release: ModelReleased) -> dict[str, Any]:
        if isinstance(release.config, dict):
            return release.config
        if self._hub is None:
            raise InvalidInput(
                "config URLs cannot be fetched here; send the config.json content",
                [Problem("detail.config", "give the config.json object")],
            )
        try:
            return self._hub().fetch_config_url(release.config)
        except HubError as exc:
            if exc.permanent:
                raise InvalidInput(
                    f"the config.json of {release.model_id} cannot be fetched: {exc.message}",
                    [Problem("detail.config", exc.message)],
                ) from None
            raise Unavailable(exc.message) from None

    def _rejected(self, model_id: str | None, exc: InvalidInput) -> ReleaseOutcome:
        problems = [{"field": p.field, "message": p.message} for p in exc.problems]
        if self._reject:
            self._reject(model_id, exc.message, exc.problems)
        return ReleaseOutcome(model_id=model_id, status="rejected", reason=exc.message, problems=problems)

    def resize_job(self, job: WatchJob, cache: BatchCache) -> WatchOutcome:
        """One fan-out job: re-size the watch against the model's config the job names. Raises what a
        redelivery may fix (see `FanoutConsumer`)."""
        out = WatchOutcome(watch_id=job.watch_id, model_id=job.model_id, config_digest=job.config_digest)
        added = cache.release(job.model_id)
        if added is None:
            out.skipped = "the model is no longer in the catalog"
            return out
        if added.config_digest is not None and added.config_digest != job.config_digest:
            out.skipped = f"{job.model_id} was re-released with another config.json since; that release re-sizes this watch"
            return out
        try:
            watch = self.watches.find(job.watch_id)
        except NotFound:
            out.skipped = "the watch was deleted since the release"
            return out
        # the catalog is built only when the job is not done already (a redelivery answers from its record)
        return self._once(job, watch, cache.catalog, cache.estimates)

    def _once(
        self,
        job: WatchJob,
        watch: ReleaseWatch,
        catalog: Callable[[], Catalog],
        cache: dict[str, EstimateResult | None],
    ) -> WatchOutcome:
        """Re-size one watch for one model, at most once per (model, config digest, watch)."""

        # the idempotency wrapper hands the work its payload; this job is already bound
        def work(payload: dict[str, str]) -> WatchOutcome:  # noqa: ARG001
            return self._resize(job, watch, catalog(), cache)

        if self.idempotency is None:
            return work(job.payload())
        from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
        from aws_lambda_powertools.utilities.idempotency.serialization.pydantic import PydanticSerializer

        config = IdempotencyConfig(
            event_key_jmespath="[model_id, config_digest, watch_id]",
            expires_after_seconds=self.idempotency_ttl_s,
        )
        if self.lambda_context is not None:
            config.register_lambda_context(self.lambda_context)
        once = idempotent_function(
            data_keyword_argument="payload",
            persistence_store=self.idempotency,
            config=config,
            output_serializer=PydanticSerializer(model=WatchOutcome),
        )(work)
        result: WatchOutcome = once(payload=job.payload())
        return result

    def _resize(
        self, job: WatchJob, watch: ReleaseWatch, catalog: Catalog, cache: dict[str, EstimateResult | None]
    ) -> WatchOutcome:
        from sizing.plan.search import estimate

        model_id = job.model_id
        out = WatchOutcome(watch_id=watch.watch_id, model_id=model_id, config_digest=job.config_digest)
        raw = {**watch.spec, "model": model_id}

        def estimated(spec_raw: dict[str, Any], field: str) -> EstimateResult | None:
            key = json.dumps(spec_raw, sort_keys=True)
            if key not in cache:
                try:
                    cache[key] = estimate(
                        parse_spec(spec_raw, prefix=field, catalog=catalog), top=TOP, catalog=catalog
                    )
                except (InvalidInput, NotFound):
                    cache[key] = None
            return cache[key]

        try:
            new = estimate(parse_spec(raw, prefix="spec", catalog=catalog), top=TOP, catalog=catalog)
        except SizingError as exc:
            out.error = f"the watch's workload cannot be estimated on {model_id}: {exc.message}"
            self._record(out)
            return out
        current = estimated(watch.spec, "spec")
        comparison = compare(model_id, new, watch.current_model, current)
        out.comparison = comparison
        out.verdict = comparison.verdict
        out.headline = comparison.headline
        if watch.measure:
            self._measure(out, watch, raw, catalog, feasible=comparison.new_best is not None)
        note = ReleaseNote(
            watch_id=watch.watch_id,
            watch_name=watch.name,
            model_id=model_id,
            headline=comparison.headline,
            comparison=comparison,
            run_id=out.run_id,
            run_status=out.run_status,
            top_architectures=summary(new, NOTE_TOP),
            config_digest=job.config_digest,
        )
        for notifier in self.notifiers:
            try:
                notifier.notify(watch, note)
            except Unavailable as exc:
                # the estimate (and any run) stands: a lost message must not start a second run on retry
                out.notify_errors.append(f"{notifier.name}: {exc.message}")
                continue
            if notifier.name == "eventbridge" and watch.notify.eventbridge:
                out.notified.append("eventbridge")
            elif notifier.name == "slack" and watch.notify.slack_channel:
                out.notified.append(f"slack:{watch.notify.slack_channel}")
        self._record(out)
        return out

    def _record(self, out: WatchOutcome) -> None:
        """Keep what the watch was told, for GET /watches/{id}."""
        self.watches.record(
            WatchResult(
                watch_id=out.watch_id,
                model_id=out.model_id,
                config_digest=out.config_digest,
                verdict=out.verdict,
                headline=out.headline,
                change_pct=out.comparison.change_pct if out.comparison else None,
                run_id=out.run_id,
                error=out.error,
            )
        )

    def _measure(
        self, out: WatchOutcome, watch: ReleaseWatch, raw: dict[str, Any], catalog: Catalog, *, feasible: bool
    ) -> None:
        if not feasible:
            out.run_skipped = "no architecture meets the SLOs on this model: nothing worth measuring"
            return
        runs = self._runs(catalog)
        if not runs.state_machine_arn:
            out.run_skipped = "measured runs are not available here: no state machine is configured"
            return
        run = runs.create_run(
            raw, top_k=watch.top_k, budget_usd=watch.budget_usd, source="event", slack=watch.slack
        )
        out.run_id = run.run_id
        out.run_status = run.status


def _source_note(release: ModelReleased) -> str:
    where = release.config_url or "the event's inline config.json"
    return f"config.json of {release.model_id} from {where} (ModelReleased by {release.source}; parameters computed from config)"
