"""The Fargate load generator a level needs, and what measuring a candidate costs with it."""

from __future__ import annotations

from sizing.catalog import load_catalog
from sizing.orchestrate.budget import (
    LOADGEN_VCPU,
    STREAMS_PER_WORKER,
    loadgen_layout,
    measurement_cost,
    workers_for,
)

ARCH = {
    "id": "a1",
    "deployment": "eks",
    "instance_type": "g6e.xlarge",
    "replicas_per_instance": 1,
    "accelerators_per_replica": 1,
}


def test_each_worker_drives_at_most_the_measured_streams_per_core() -> None:
    # given levels from one stream to 1,024
    for streams in (1, STREAMS_PER_WORKER, STREAMS_PER_WORKER + 1, 1024):
        # when the load generator is laid out for the level
        layout = loadgen_layout(streams)
        # then no worker drives more than the measured figure, and one worker fewer would not do
        assert layout.streams_per_worker <= STREAMS_PER_WORKER
        assert layout.workers * layout.streams_per_worker >= streams
        assert layout.workers == 1 or (layout.workers - 1) * STREAMS_PER_WORKER < streams
        assert layout.workers == workers_for(streams)


def test_a_1024_stream_level_states_its_tasks_and_their_size() -> None:
    # when a 1,024-stream level is laid out
    layout = loadgen_layout(1024)
    # then it is a master and its workers, each process of the same size, and it says so
    assert layout.processes == 1 + layout.workers
    assert layout.vcpu == layout.processes * LOADGEN_VCPU
    assert f"a master and {layout.workers} workers" in layout.describe()


def test_a_level_above_the_configured_workers_is_priced_with_the_workers_it_needs() -> None:
    # given a run configured with 2 workers, and a candidate whose highest level needs more
    cat = load_catalog()
    big = 4 * STREAMS_PER_WORKER
    # when its measurement is priced without and with its highest level
    plain = measurement_cost([ARCH], cat, 600, 2, "us-east-1")
    sized = measurement_cost([ARCH], cat, 600, 2, "us-east-1", max_streams=[big])
    small = measurement_cost([ARCH], cat, 600, 2, "us-east-1", max_streams=[8])
    # then the arithmetic names the Fargate processes that level needs, and costs more
    assert f"Fargate {1 + workers_for(big)} x" in sized["candidates"][0]["arithmetic"]
    assert sized["usd"] > plain["usd"]
    # and a small level keeps the configured workers
    assert small == plain
