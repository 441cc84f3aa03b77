"""The Fargate load generator a level needs, and what measuring a candidate costs with it."""

from __future__ import annotations

from sizing.catalog import load_catalog
from sizing.orchestrate.budget import (
    STREAMS_PER_WORKER,
    STREAMS_PER_WORKER_READ_STAMPED,
    kernel_stamped,
    loadgen_layout,
    measurement_cost,
    sweep_workers,
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


def test_a_1024_stream_level_states_its_tasks_and_their_size() -> None:
    # when a 1,024-stream level is laid out
    layout = loadgen_layout(1024)
    # then it is a master and 4 workers (1,024 / 320 streams per core, 256 each), 2 vCPU / 4 GB each, and it says so
    assert (layout.workers, layout.streams_per_worker, layout.vcpu, layout.gb) == (4, 256, 10, 20)
    assert "a master and 4 workers" in layout.describe()


def test_a_level_above_the_configured_workers_is_priced_with_the_workers_it_needs() -> None:
    # given a run configured with 2 workers, and a candidate whose highest level needs more
    cat = load_catalog()
    big = 4 * STREAMS_PER_WORKER
    # when its measurement is priced without and with its highest level
    plain = measurement_cost([ARCH], cat, 600, [2], "us-east-1")
    sized = measurement_cost([ARCH], cat, 600, [sweep_workers(2, [8, big])], "us-east-1")
    small = measurement_cost([ARCH], cat, 600, [sweep_workers(2, [8])], "us-east-1")
    # then the arithmetic names the Fargate task that level needs (a master and its workers), and costs more
    assert f"(a master and {workers_for(big)} workers)" in sized["candidates"][0]["arithmetic"]
    assert sized["usd"] > plain["usd"]
    # and a small level keeps the configured workers
    assert small == plain


def test_the_load_generators_task_is_the_smallest_fargate_size_that_holds_its_processes() -> None:
    # given sweeps whose highest level is 200, 640, 1,024 and 2,240 streams
    from sizing.orchestrate.budget import fargate_task_size

    sizes = {streams: fargate_task_size(workers_for(streams)) for streams in (200, 640, 1024, 2240)}
    # then a master and 1 worker fit the task definition's own 4 vCPU / 8 GB, a master and 2 workers (6 vCPU /
    # 12 GB of processes) an 8 vCPU task with Fargate's 16 GB floor, 4 workers (10 vCPU) a 16 vCPU task with its
    # 32 GB floor, and 7 workers that same task's whole
    assert sizes == {200: (4, 8), 640: (8, 16), 1024: (16, 32), 2240: (16, 32)}


def test_a_level_no_fargate_task_can_drive_is_refused_naming_the_limit() -> None:
    # given a level beyond what one 16 vCPU task drives at the measured streams per core
    import pytest

    from sizing.base.errors import InvalidInput
    from sizing.orchestrate.budget import MAX_WORKERS_PER_TASK, fargate_task_size

    # when the task is sized, then it is refused with the figures
    with pytest.raises(InvalidInput, match=f"at most {MAX_WORKERS_PER_TASK}"):
        fargate_task_size(workers_for(MAX_WORKERS_PER_TASK * STREAMS_PER_WORKER + 1))


def test_an_endpoint_read_without_the_kernels_stamps_gets_the_read_time_density() -> None:
    # given a plain-HTTP EKS service, an HTTPS endpoint and SageMaker's runtime URL (read through botocore)
    eks = kernel_stamped("http://vllm.sizing.svc.cluster.local:8000", "eks")
    https = kernel_stamped("https://llm.example.com", "eks")
    sagemaker = kernel_stamped(None, "sagemaker")
    # then only the plain-HTTP one is read with the kernel's receive stamps (an EKS service before it has a URL too)
    assert (eks, https, sagemaker, kernel_stamped(None, "eks")) == (True, False, False, True)
    # and the same 1,024-stream level is laid out at each transport's measured streams per core
    assert loadgen_layout(1024, stamped=True).workers == 4
    assert loadgen_layout(1024, stamped=False).workers == 5
    assert loadgen_layout(1024, stamped=False).streams_per_worker <= STREAMS_PER_WORKER_READ_STAMPED
    assert sweep_workers(1, [1024], stamped=False) > sweep_workers(1, [1024], stamped=True)
