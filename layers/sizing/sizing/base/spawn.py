"""How the load test starts a closed loop's users, for the load generator and for the simulator that re-reads it.

The sweep (`sizing.loadtest.sweep`) starts a level's users spread over `RAMP_SHARE_OF_WARMUP` of its warm-up, at
least `MIN_SPAWN_PER_S` a second (Locust spawns at a rate, not over a span); without a warm-up, all within ~0.1 s.
The estimator simulates one of its closed-loop levels with its users started the same way (`ramp_s`): a loop whose
users start within a few seconds of each other keeps them close for rounds, and their prompts overlap where the
estimator's evenly spread users never would (docs/engine.md, "How the load test starts its users").
"""

from __future__ import annotations

#: Users start spread over this share of the warm-up. Users that all start at once and ask for the same lengths
#: stay in lock-step (waves of simultaneous arrivals no real population makes, and the estimator does not
#: assume); the rest of the warm-up lets the spread population reach steady state.
RAMP_SHARE_OF_WARMUP = 0.5
#: Fewest users a second the sweep spawns while it ramps (a level of few users and a long warm-up starts them one a
#: second, not spread over the whole ramp).
MIN_SPAWN_PER_S = 1.0
#: Spawn rate per user when there is no warm-up to spread over (everyone within ~0.1 s).
FAST_SPAWN_PER_USER = 10


def spawn_rate(users: int, warmup_s: float) -> float:
    """Users a second the sweep spawns a closed-loop level's `users` at, after a warm-up of `warmup_s`."""
    ramp = warmup_s * RAMP_SHARE_OF_WARMUP
    return max(users / ramp, MIN_SPAWN_PER_S) if ramp > 0 else float(users * FAST_SPAWN_PER_USER)


def ramp_s(users: int, warmup_s: float) -> float:
    """Seconds over which that level's users start: `users` at `spawn_rate`."""
    return users / spawn_rate(users, warmup_s)


def simulated_ramp_s(users: int, warmup_s: float | None, lockstep_group: int = 1) -> float | None:
    """The ramp a simulator starts a measured closed-loop level's users over (`ClosedLoop.ramp_s`): the load test's
    own (`ramp_s`) where the level states its warm-up; None (the simulator's default) where it does not, or where
    its users fell into lock-step groups, which are simulated as groups (started over the ramp, simulated users
    spread out where the engine's stay grouped: docs/engine.md, "How the load test starts its users")."""
    if warmup_s is None or lockstep_group > 1:
        return None
    return ramp_s(users, warmup_s)
