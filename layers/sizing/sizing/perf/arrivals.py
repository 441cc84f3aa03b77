"""When the simulated engine sees each request: Poisson arrivals (an open loop), or users that each send their next
request when the previous one ends (a closed loop, in waves or not). The engine sees a request the API server's
share of it (`delay`: tokenise, schedule) after it arrives; both sources put it in the scheduler's waiting queue
then, and record its arrival time in `arrival`.

Where that share is work on the cores that compute the model (`cpu`: a CPU server of one physical core, whose API
server and model share it), the engine loses it: a request handled while the engine runs takes the part of its
`cpu` seconds that fell inside the engine's busy spell from the engine's steps (`debt`, which the scheduler adds to
its clock when it queues the request). A request handled while the engine idles costs the engine nothing: its
`delay` is already in its first token."""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from typing import Final

INF: Final = math.inf
#: heapq's functions, bound once (a C static where this module is compiled, as in `scheduler`)
heappush: Final = heapq.heappush
heappop: Final = heapq.heappop


def engine_share(cpu: float, seen: float, busy_since: float) -> float:
    """What of a request's `cpu` seconds on the model's cores fell inside the engine's busy spell (begun at
    `busy_since`), the engine seeing the request at `seen`: the time it took from the engine's steps."""
    return min(cpu, seen - busy_since) if cpu > 0.0 and seen > busy_since else 0.0


class Waiting:
    """The engine's waiting queue: request ids, first come first served; a preempted request goes back to its
    front. A list read from `head` (taking the first moves `head`; emptied, it starts over), so the compiled loop
    calls these methods directly instead of a deque's through the Python API."""

    __slots__ = ("head", "ids")

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.head = 0

    def size(self) -> int:
        return len(self.ids) - self.head

    def push(self, i: int) -> None:
        self.ids.append(i)

    def first(self) -> int:
        return self.ids[self.head]

    def pop_first(self) -> int:
        i = self.ids[self.head]
        self.head += 1
        if self.head == len(self.ids):
            self.ids.clear()
            self.head = 0
        return i

    def as_list(self) -> list[int]:
        """The ids waiting, first first."""
        return self.ids[self.head :]

    def push_front(self, i: int) -> None:
        if self.head > 0:
            self.head -= 1
            self.ids[self.head] = i
        else:
            self.ids.insert(0, i)


class OpenArrivals:
    """Requests at fixed times `arrival` (ascending), whatever the replica does."""

    __slots__ = ("arrival", "busy_since", "cpu", "debt", "n", "next_idx", "next_seen", "seen", "waiting")

    def __init__(self, arrival: list[float], delay: float, waiting: Waiting, cpu: float = 0.0):
        self.arrival = arrival
        self.waiting = waiting
        self.cpu = cpu
        self.busy_since = INF  # when the engine's current busy spell began (inf: idle)
        self.debt = 0.0  # seconds the requests queued so far took from the engine's steps
        self.n = len(arrival)
        # when the engine sees each request, and inf after the last
        self.seen = [a + delay for a in arrival]
        self.seen.append(INF)
        self.next_idx = 0
        self.next_seen = self.seen[0]  # when the engine sees request next_idx

    def due(self, t: float) -> float:
        """Queue every request the engine has seen by `t`; returns when it sees the next one (`next_seen`)."""
        seen = self.seen
        i = self.next_idx
        while seen[i] <= t and i < self.n:
            self.waiting.push(i)
            self.debt += engine_share(self.cpu, seen[i], self.busy_since)
            i += 1
        self.next_idx = i
        self.next_seen = nxt = seen[i]
        return nxt

    def pending(self) -> bool:
        """Whether a request is still to come."""
        return self.next_idx < self.n

    def ended(self, when: float) -> None:
        """A request ended: an open loop does not care."""


class ClosedArrivals:
    """`k0` users whose first requests start `ramp / k0` apart; a user sends its next request `think[j]` after its
    previous one ends. With `wave_gap` the users run in waves instead: when the last request of a wave ends, the
    next wave's `k0` requests start `wave_gap` apart. With `group` > 1 the users start in lock-step groups of that
    many, the groups spread over `ramp` (a closed loop of fixed lengths that a real engine has bunched: each group
    is prefilled together and finishes together). Requests are numbered in the order they are sent."""

    __slots__ = (
        "arrival",
        "busy_since",
        "cpu",
        "debt",
        "delay",
        "future",
        "k0",
        "next_seen",
        "think",
        "users",
        "waiting",
        "wave_gap",
        "wave_left",
    )

    def __init__(
        self,
        arrival: list[float],
        delay: float,
        waiting: Waiting,
        k0: int,
        ramp: float,
        think: list[float],
        wave_gap: float | None,
        group: int = 1,
        cpu: float = 0.0,
    ):
        self.arrival = arrival
        self.delay = delay
        self.cpu = cpu
        self.busy_since = INF
        self.debt = 0.0
        self.waiting = waiting
        self.think = think
        self.k0 = k0
        self.future: list[tuple[float, int]] = []  # (when the engine sees it, idx)
        groups = -(-k0 // group) if group > 1 else k0
        for k in range(k0):
            arrival[k] = ramp * k / k0 if group <= 1 else ramp * (k // group) / groups
            if arrival[k] + delay <= 0:
                waiting.push(k)
            else:
                heappush(self.future, (arrival[k] + delay, k))
        self.users: Iterator[int] = iter(range(k0, len(arrival)))  # the requests still to send, in order
        self.next_seen = self.next_time()
        self.wave_gap = wave_gap
        self.wave_left = k0  # requests of the current wave still running

    def due(self, t: float) -> float:
        """Queue every request the engine has seen by `t`; returns when it sees the next one (`next_seen`)."""
        future = self.future
        while future and future[0][0] <= t:
            seen, i = heappop(future)
            self.waiting.push(i)
            self.debt += engine_share(self.cpu, seen, self.busy_since)
        self.next_seen = nxt = future[0][0] if future else INF
        return nxt

    def next_time(self) -> float:
        """When the engine sees the next request already sent (inf: none is on its way)."""
        return self.future[0][0] if self.future else INF

    def pending(self) -> bool:
        """Whether a request is on its way (a user that has not sent its next one yet is not)."""
        return bool(self.future)

    def ended(self, when: float) -> None:
        """A request ended at `when`: its user sends the next one after thinking (in waves: the last request of a
        wave to end launches the next wave)."""
        arrival, delay = self.arrival, self.delay
        if self.wave_gap is not None:
            self.wave_left -= 1
            if self.wave_left > 0:
                return
            for k in range(self.k0):
                j = next(self.users, -1)
                if j < 0:
                    break
                self.wave_left += 1
                arrival[j] = when + k * self.wave_gap
                heappush(self.future, (arrival[j] + delay, j))
            self.next_seen = self.next_time()
            return
        j = next(self.users, -1)
        if j >= 0:
            arrival[j] = when + self.think[j]
            if self.think[j] + delay > 0:
                heappush(self.future, (arrival[j] + delay, j))
                self.next_seen = self.future[0][0]
            else:
                self.waiting.push(j)
