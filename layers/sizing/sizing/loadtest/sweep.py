"""The sweep's load shape: steps through the plan's levels (see `sizing.loadtest.locustfile`'s docstring). Only
ever imported inside the load-test process, and `locust` first."""

import locust  # noqa: I001  (first: gevent monkey-patching before ssl/boto3)

import dataclasses
import gc
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import gevent
from locust import LoadTestShape
from locust.runners import MasterRunner, WORKER_REPORT_INTERVAL

from sizing.base.spawn import FAST_SPAWN_PER_USER, spawn_rate
from sizing.loadtest.capacity import near_limit, needs_more
from sizing.loadtest.collector import COLLECTOR, configured
from sizing.loadtest.confidence import level_verdict
from sizing.loadtest.config import LoadTestConfig
from sizing.loadtest.metrics import (
    RequestRecord,
    StepResult,
    backlog,
    check_slo,
    confident_checks,
    summarize,
    with_checks,
)
from sizing.loadtest.overload import LOOK_EVERY_S, Overload, certain
from sizing.loadtest.plan import LevelPlan, plan_for, pointless_after
from sizing.loadtest.steps import StepsSample, sample
from sizing.loadtest.server import TWIN_LAG_SHARE, UNEXPECTED_HIT_SHARE, MetricsSnapshot, scrape, window

assert locust  # imported for its side effect

#: Seconds the master waits after a step before summarizing it, so every worker's last report has arrived.
DRAIN_S = WORKER_REPORT_INTERVAL + 1.0
#: Seconds between progress lines within a step.
PROGRESS_EVERY_S = 10.0
#: Seconds between two calls of a shape's `tick()`: Locust's shape worker sleeps one second less the tick's own
#: time (locust/runners.py, `Runner.shape_worker`). A window that ends between two ticks is waited for inside the
#: tick, so a step lasts what its plan says instead of being rounded up to the next whole second.
SHAPE_TICK_S = 1.0
#: Seconds between checks, inside a tick, for the window's last answers (the step's tail).
TAIL_POLL_S = 0.05


def _steps_of(records: list[RequestRecord], window: tuple[float, float]) -> StepsSample | None:
    """The level's engine steps (`sizing.loadtest.steps.sample`); None, with a line on stderr, where its records
    cannot be read as steps: the level's figures stand without them."""
    try:
        return sample(records, window)
    except (ValueError, TypeError, ArithmeticError) as exc:
        print(f"engine steps not rebuilt: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return None


class SweepShape(LoadTestShape):
    """Runs the plan's levels one step at a time (see the module docstring)."""

    def __init__(
        self, cfg: LoadTestConfig | None = None, plan: LevelPlan | None = None,
        on_step: Callable[[StepResult], None] | None = None, dispatchers: int = 1, drain_s: float = 0.0,
    ) -> None:  # fmt: skip
        super().__init__()  # type: ignore[no-untyped-call]  # Locust's LoadTestShape is untyped
        self._cfg = cfg
        self._plan = plan
        self.on_step = on_step
        self.dispatchers = dispatchers
        self.drain_s = drain_s
        self.history: list[StepResult] = []
        self.level: float | None = None
        self.step_start = 0.0
        self.began = time.time()
        self.stopped_by = "plan"
        self._started = False
        self._last_progress = time.time()
        #: the server's /metrics at the current step's window start (None: not scraped, or none to scrape)
        self._server_before: MetricsSnapshot | None = None
        self._scrape_at: Any = None
        #: when arrivals were paused between two open-loop levels (None: not draining)
        self._draining_since: float | None = None
        #: the current step's window: the config's, grown one window at a time while its verdict is unsure
        self.window_s = 0.0
        #: when the current step last looked whether its server fell behind beyond doubt (`_stop_overloaded`)
        self._looked_at = 0.0

    @property
    def cfg(self) -> LoadTestConfig:
        """The settings (given, or -- under `locust -f ... --sizing-config` -- read at init, after this class
        was instantiated)."""
        if self._cfg is None:
            self._cfg = configured()
        return self._cfg

    @property
    def plan(self) -> LevelPlan:
        if self._plan is None:
            self._plan = plan_for(self.cfg)
        return self._plan

    def _begin(self, now: float) -> bool:
        self.level = self.plan.next_level(self.history)
        self.step_start = now
        self.window_s = self.cfg.duration_s
        self._last_progress = now
        self._looked_at = now
        if self.level is None:
            return False
        if pointless_after(self.history, self.level):  # the sweep ends instead of spending its time
            self.stopped_by = "no_answer"
            self.level = None
            return False
        if self.cfg.mode == "rate":
            assert self.runner is not None
            self.runner.send_message("sizing_rate", self.level / self.dispatchers)
        self._server_before = None
        if self.cfg.server_metrics and self.cfg.target == "openai":
            self._scrape_at = gevent.spawn_later(self.cfg.warmup_s, self._scrape_window_start)
        print(f"step {len(self.history)}: {self._describe(self.level)} ...", file=sys.stderr, flush=True)
        return True

    def _scrape_window_start(self) -> None:
        self._server_before = scrape(self.cfg.endpoint)

    def _server_figures(self, result: StepResult) -> StepResult:
        """The server's own view of the step (its /metrics from the window's start to now, when the window's
        last answers are in), and a flag when its prefix cache served prompts that share no prefix."""
        before, self._server_before = self._server_before, None
        if before is None:
            return result
        after = scrape(self.cfg.endpoint)
        if after is None:
            return result
        server = window(before, after)
        flags = list(result.flags)
        share = server.prefix_cache_hit_share
        if share is not None and self.cfg.shared_prefix_tokens == 0 and share > UNEXPECTED_HIT_SHARE:
            flags.append(
                f"unexpected prefix-cache hits: the server served {share:.0%} of the prompt tokens from its"
                " cache though the prompts share no prefix (prompts repeated from an earlier run with the same"
                " seed, or another client on the server): TTFT is flattered"
            )
        lag = server.twin_lag_share
        if lag is not None and lag > TWIN_LAG_SHARE:
            flags.append(
                f"the twin ran behind its model by {lag:.0%} of the window (the machine is busy): its figures are"
                " slower than the model's, so they say how busy the machine was, not what the model predicts"
            )
        return result.model_copy(update={"server": server, "flags": flags})

    def _describe(self, level: float) -> str:
        return " ".join(f"{k}={v:g}" for k, v in self.cfg.target_of(level).items())

    def _targets(self) -> list[tuple[str, str, float]]:
        chosen = self.cfg.sla_search.targets if self.cfg.sla_search else self.cfg.slo
        return [(t.metric, t.percentile, t.limit) for t in chosen]

    def _grow_window(self, window_end: float) -> bool:
        """When the window's answers are in (its tail done; the load went on meanwhile): grow it by one window when
        an SLO target's verdict is still unsure, or (a capacity search) a target's reading lies near its limit on
        fewer than the search's `level_requests`, or an open-loop level's backlog grew without proving beyond doubt
        that its server fell behind (`sizing.loadtest.capacity.needs_more`, `sizing.loadtest.overload`), and the
        window may grow (`window_cap_s`). The requests sent since the window's end fall in the grown window. A request still running
        at the tail's cap counts as it will: an e2e longer than any measured."""
        cfg = self.cfg
        targets = self._targets()
        if not targets or self.window_s + cfg.duration_s > cfg.window_cap_s + 1e-9:
            return False
        lo = self.step_start + cfg.warmup_s
        checks = confident_checks(
            COLLECTOR.records, (lo, window_end), targets, COLLECTOR.unfinished(lo, window_end)
        )
        search = cfg.capacity_search
        over = self._overload(window_end)
        if not needs_more(checks, search.level_requests if search is not None else None, over):
            return False
        self.window_s += cfg.duration_s
        if over is not None and (over.overloaded or over.unsure):
            why = f"the backlog grew by {over.backlog_end - over.backlog_start} ({over.z:.1f}x its noise)"
        elif level_verdict(checks) == "unsure":
            why = "unsure (" + ", ".join(f"{c.target} {c.note or 'interval straddles ' + format(c.limit, 'g')}"
                                         for c in checks if c.verdict == "unsure") + ")"  # fmt: skip
        else:
            why = "near the SLO edge on " + ", ".join(
                f"{c.target} {c.samples}" for c in checks if near_limit(c)
            )
            why += f" of {search.level_requests if search is not None else 0} requests"
        print(
            f"step {len(self.history)}: {why}: window grows to {self.window_s:g} s",
            file=sys.stderr,
            flush=True,
        )
        return True

    def _overload(self, end: float) -> Overload | None:
        """The backlog test (`sizing.loadtest.overload`) of an open-loop step over its window up to `end` (None: a
        closed loop, whose users wait for their answers and so cannot outrun the server, or too few arrivals). On a
        master, `end` is held to the workers' last reports, past which their records are not here yet."""
        if self.cfg.mode != "rate":
            return None
        reports = [made for made, _, _ in COLLECTOR.reported.values()]
        if reports:
            end = min(end, *reports)
        inflight = COLLECTOR.inflight_starts() + [
            t for _, _, starts in COLLECTOR.reported.values() for t in starts
        ]
        lo = self.step_start + self.cfg.warmup_s
        return backlog(COLLECTOR.records, inflight, (lo, end), self.step_start)

    def _stop_overloaded(self, now: float, window_end: float) -> bool:
        """Whether an open-loop step ends now because its server fell behind: beyond doubt
        (`sizing.loadtest.overload.certain`; looked at every LOOK_EVERY_S from the end of the step's first window
        on), or at the end of a window that may not grow, by the test's bound (`Overload.overloaded`). The step then
        ends at once, its window cut to now and no tail awaited (an overloaded level's tail runs to its cap: its
        queue never empties), and fails: the rest would measure nothing its verdict needs, on a server (a GPU) that
        is paid by the second."""
        cfg = self.cfg
        if cfg.mode != "rate" or not self._targets():
            return False
        if now < window_end:
            if now < self.step_start + cfg.warmup_s + cfg.duration_s or now - self._looked_at < LOOK_EVERY_S:
                return False
        elif self._looked_at >= window_end:  # the window's end was looked at: its tail is awaited as usual
            return False
        self._looked_at = now
        end = min(now, window_end)
        over = self._overload(end)
        last = self.window_s + cfg.duration_s > cfg.window_cap_s + 1e-9
        if over is None or not (certain(over) or (now >= window_end and last and over.overloaded)):
            return False
        print(f"step {len(self.history)}: {over.reason()}: the level stops", file=sys.stderr, flush=True)
        self._finish(end=end, stopped=now < window_end)
        return True

    def _finish(self, end: float | None = None, stopped: bool = False) -> None:
        assert self.level is not None
        lo = self.step_start + self.cfg.warmup_s
        hi = end if end is not None else lo + self.window_s
        unfinished = COLLECTOR.unfinished(lo, hi)
        result = summarize(
            COLLECTOR.records, step=len(self.history), target=self.cfg.target_of(self.level), window=(lo, hi),
            warmup_s=self.cfg.warmup_s, unfinished=unfinished,
        )  # fmt: skip
        over = self._overload(hi)
        if over is not None:
            result = result.model_copy(
                update={"overload": over.model_copy(update={"stopped_early": stopped})}
            )
        targets = self._targets()
        if targets:
            result = check_slo(result, targets)
            result = with_checks(result, confident_checks(COLLECTOR.records, (lo, hi), targets, unfinished))
        if self._scrape_at is not None:
            self._scrape_at.kill(block=False)  # a step cut short before its window: no start scrape
            self._scrape_at = None
        result = self._server_figures(result)
        result = result.model_copy(update={"engine_steps": _steps_of(COLLECTOR.records, (lo, hi))})
        self.history.append(result)
        if self.cfg.save_requests:
            # the warm-up's requests too, marked: they are what the engine was already running when the window
            # opened (a replay of the window's arrivals starts from them; `sizing steps` rebuilds its first steps)
            with open(f"{self.cfg.out_dir}/requests.jsonl", "a") as f:
                for r in COLLECTOR.records:
                    if self.step_start <= r.start < hi:
                        warmup = {"warmup": True} if r.start < lo else {}
                        f.write(json.dumps({"step": result.step, **dataclasses.asdict(r), **warmup}) + "\n")
        COLLECTOR.records.clear()  # whatever finished so far belongs to this step or to none
        gc.collect()  # between steps, where a pause measures nothing (process.py turns automatic GC off)
        if self.on_step is not None:
            self.on_step(result)

    def _window_counted(self, window_end: float, now: float) -> bool:
        """Whether every request sent in the window has finished and its record is here: in this process, none
        sent before the window's end is still in flight; on a master, every connected worker has reported since
        the window ended and had none in flight then. A request still streaming `tail_cap_s` after the window
        (plus a worker report interval) ends the wait, so a stuck stream cannot hold the sweep; it is counted as
        unfinished, not dropped."""
        if now >= window_end + self.cfg.tail_cap_s + self.drain_s:
            return True
        runner = self.runner
        if isinstance(runner, MasterRunner):
            fresh = [oldest for made, oldest, _ in COLLECTOR.reported.values() if made >= window_end]
            return len(fresh) >= runner.worker_count and all(o is None or o >= window_end for o in fresh)
        oldest = COLLECTOR.oldest_inflight()
        return oldest is None or oldest >= window_end

    def _await_window(self, window_end: float, now: float) -> float:
        """When the window ends before the next tick, wait for its end and then (within this tick) for its last
        answers, instead of leaving both to the next tick. Returns the time the step stands at. The wait is a
        gevent sleep: the users keep sending and answering meanwhile."""
        if now < window_end <= now + SHAPE_TICK_S:
            gevent.sleep(window_end - now)
            now = time.time()
        if now >= window_end:
            give_up = now + SHAPE_TICK_S - 2 * TAIL_POLL_S  # past it, the next tick looks again
            while not self._window_counted(window_end, now) and now < give_up:
                gevent.sleep(TAIL_POLL_S)
                now = time.time()
        return now

    def _start_draining(self, now: float) -> bool:
        """Between two open-loop levels: stop arrivals until what the last one left in flight has ended, so the
        next level does not inherit its queue (an overloaded level left a backlog that read as TTFT p95 27-45 s
        at the lower rates searched after it). True when there is something to wait for."""
        if self.cfg.mode != "rate" or not self._in_flight():
            return False
        self._draining_since = now
        assert self.runner is not None
        self.runner.send_message("sizing_rate", 0.0)
        print(f"step {len(self.history)}: arrivals paused until the last level's requests end", file=sys.stderr,
              flush=True)  # fmt: skip
        return True

    def _in_flight(self) -> bool:
        if COLLECTOR.oldest_inflight() is not None:
            return True
        return any(starts for _, _, starts in COLLECTOR.reported.values())

    def _drained(self, now: float) -> bool:
        """Nothing in flight any more (workers: each has reported since with none), or the request timeout reached
        (by then every request has ended, answered or timed out). Not the tail's cap: an overloaded level of
        minute-long answers leaves a backlog that takes longer than its window to clear (batch-summarization's
        twin: 228 of 427 requests still running when its first level stopped), and a level begun on it inherits
        its queue -- the next rate searched, 68% of saturation, failed with 165 requests unfinished."""
        since = self._draining_since
        assert since is not None
        if now - since >= self.cfg.request_timeout_s:
            return True
        if COLLECTOR.oldest_inflight() is not None:
            return False
        return all(made >= since and not starts for made, _, starts in COLLECTOR.reported.values())

    def _users(self) -> tuple[int, float]:
        assert self.level is not None
        if self.cfg.mode == "rate":  # the dispatchers, at once: the arrivals are what the rate shapes
            return self.dispatchers, float(self.dispatchers * FAST_SPAWN_PER_USER)
        users = int(self.level)
        return users, spawn_rate(users, self.cfg.warmup_s)

    def _next_step(self, now: float) -> tuple[int, float] | None:
        """After a step: drain what it left in flight, or begin the next (None: the sweep is over)."""
        if self._start_draining(now) or self._begin(now):
            return self._users()
        return None

    def tick(self) -> tuple[int, float] | None:
        now = time.time()
        if not self._started:
            self._started = True
            if not self._begin(now):
                return None
            return self._users()
        if self.level is None:
            return None
        if self._draining_since is not None:
            if self._drained(now):
                self._draining_since = None
                if not self._begin(now):
                    return None
            return self._users()
        cfg = self.cfg
        elapsed = now - self.step_start
        over_total = cfg.max_total_s is not None and now - self.began >= cfg.max_total_s
        over_requests = cfg.max_requests is not None and COLLECTOR.total >= cfg.max_requests
        if over_total or over_requests:
            self.stopped_by = "max_total_s" if over_total else "max_requests"
            if elapsed > cfg.warmup_s:
                self._finish(end=min(now, self.step_start + cfg.warmup_s + self.window_s))
            self.level = None
            return None
        window_end = self.step_start + cfg.warmup_s + self.window_s
        if self._stop_overloaded(now, window_end):
            return self._next_step(now)
        now = self._await_window(window_end, now)
        if now >= window_end and self._window_counted(window_end, now):
            # unsure: the level runs on, its window grown (the load never paused)
            if self._grow_window(window_end):
                return self._users()
            self._finish()
            return self._next_step(now)
        elif now - self._last_progress >= PROGRESS_EVERY_S:
            self._last_progress = now
            phase = "warm-up" if elapsed < cfg.warmup_s else "measuring" if now < window_end else "tail"
            running = (
                COLLECTOR.unfinished(self.step_start + cfg.warmup_s, window_end) if phase == "tail" else None
            )
            still = "" if running is None else f", {running} of the window's still running"
            print(
                f"step {len(self.history)}: {phase}, {elapsed:.0f} s in, {len(COLLECTOR.records)} answers so far"
                + still,
                file=sys.stderr,
                flush=True,
            )
        return self._users()
