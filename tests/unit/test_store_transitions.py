"""The run status rules, as data: a finished run never moves again, and every status is reachable from PENDING."""

from __future__ import annotations

from sizing.store.items import ALLOWED_FROM, RUN_STATUSES, TERMINAL


def test_a_finished_run_never_moves_again() -> None:
    for to_status, predecessors in ALLOWED_FROM.items():
        assert not predecessors & TERMINAL, (
            f"{to_status} may follow a finished run: {predecessors & TERMINAL}"
        )


def test_running_only_follows_pending_or_queued() -> None:
    assert ALLOWED_FROM["RUNNING"] == {"PENDING", "QUEUED"}


def test_every_status_is_reachable_from_pending_and_every_unfinished_run_can_finish() -> None:
    # given the graph of allowed moves
    successors = {s: {t for t, preds in ALLOWED_FROM.items() if s in preds} for s in RUN_STATUSES}
    reached, frontier = {"PENDING"}, ["PENDING"]
    while frontier:
        for nxt in successors[frontier.pop()] - reached:
            reached.add(nxt)
            frontier.append(nxt)
    # then
    assert reached == set(RUN_STATUSES)
    for status in set(RUN_STATUSES) - TERMINAL:
        assert successors[status] & TERMINAL, f"{status} has no way to finish"
