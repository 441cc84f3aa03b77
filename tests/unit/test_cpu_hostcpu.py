"""Which catalog CPU instance a machine counts as (`sizing.catalog.hostcpu`), read from its /proc/cpuinfo, and the EPYC
families that make an AMD machine one: the engine on such a box measures a c6a.large (Milan) or an m7a.medium (Genoa),
not a c7i.large."""

from __future__ import annotations

import pytest

from sizing.catalog import load_catalog
from sizing.catalog.hostcpu import (
    CPUINFO,
    ENGINE_CORES,
    local_instance,
    parse_cpuinfo,
    shipped_cpus,
    this_machine,
)
from sizing.perf.calibration import family_of, kind_of, profile_for

SAPPHIRE_RAPIDS = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8488C
flags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8

processor\t: 1
vendor_id\t: GenuineIntel
"""
MILAN = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
flags\t\t: fpu avx avx2 fma sha_ni vaes

processor\t: 1
vendor_id\t: AuthenticAMD
"""
ICE_LAKE = SAPPHIRE_RAPIDS.replace("amx_bf16 amx_tile amx_int8", "").replace("143", "106")
GENOA = MILAN.replace("model\t\t: 1\n", "model\t\t: 17\n").replace("avx2", "avx2 avx512f avx512_bf16")


@pytest.fixture(scope="module")
def cpus() -> dict:
    return shipped_cpus()


@pytest.mark.parametrize(
    ("text", "vcpus", "expected"),
    [
        (SAPPHIRE_RAPIDS, None, ("xeon-spr", "c7i.large")),
        (MILAN, None, ("epyc-milan", "c6a.large")),
        (MILAN, 8, ("epyc-milan", "c6a.2xlarge")),
        (GENOA, None, ("epyc-genoa", "m7a.large")),
    ],
)
def test_a_machine_counts_as_the_catalog_instance_of_its_processor_and_vcpus(cpus, text, vcpus, expected):
    # given a machine's /proc/cpuinfo (2 processors listed) and, where stated, another vCPU count
    cpu = parse_cpuinfo(text, vcpus)
    # when the catalog instance it counts as is read
    here = local_instance(cpus, cpu)
    # then it is the first family of its processor at the size of its vCPUs, and the accelerator is named from both
    assert here is not None and (here.processor, here.instance_type) == expected
    assert here.accelerator == f"{expected[0]}-{expected[1]}"


TURIN = MILAN.replace("cpu family\t: 25", "cpu family\t: 26").replace("avx2", "avx2 avx512f avx512_bf16")


@pytest.mark.parametrize("text", [ICE_LAKE, TURIN, ""], ids=["xeon-without-amx", "epyc-turin", "unreadable"])
def test_a_processor_the_catalog_does_not_know_counts_as_no_instance(cpus, text):
    # given a Xeon without AMX (not a Sapphire Rapids), an EPYC of a generation the catalog lacks, or no cpuinfo
    # when / then no catalog instance is named: its figures would be filed under another machine's hardware
    assert local_instance(cpus, parse_cpuinfo(text, 2)) is None


def test_a_milan_slice_is_one_core_of_fma_pipes_without_a_matrix_unit():
    # given the catalog
    cat = load_catalog()
    small, socket = (cat.instance(f"c6a.{s}") for s in ("large", "24xlarge"))
    acc_small, acc_socket = cat.accelerator_of(small), cat.accelerator_of(socket)
    # then 2 vCPUs are one core: 2 FMA pipes x 8 fp32 lanes x 2 FLOPs x 3.6 GHz = 0.115 TFLOPS, bf16 widened to fp32,
    # no int8 path faster than that; it reads what one core reads (16 GB/s measured), 48 cores the socket's 204.8
    assert acc_small.vendor == "amd" and acc_small.kind == "cpu"
    assert acc_small.bf16_tflops == pytest.approx(32 * 3.6e9 / 1e12, rel=1e-2)
    assert acc_small.int8_tops is None
    assert acc_small.memory_bw_gbs == pytest.approx(16.0)
    assert acc_socket.memory_bw_gbs == pytest.approx(204.8)
    # and it is a CPU family of its own, priced below the Xeon slice of the same memory
    assert family_of(acc_small.id) == "epyc-milan" and kind_of("epyc-milan") == "cpu"
    assert small.price("us-east-1").usd_per_hour < cat.instance("c7i.large").price("us-east-1").usd_per_hour
    assert small.memory_gib == cat.instance("c7i.large").memory_gib


def test_a_milan_instance_is_estimated_from_its_own_fp32_rows_within_physics():
    # given the shipped profile, fitted on first-party rows measured on an EPYC Milan core in fp32 (docs/engine.md,
    # "fp32 where the CPU has no bf16")
    milan = profile_for("epyc-milan-c6a.large", "vllm")
    xeon = profile_for("xeon-spr-c7i.large", "vllm")
    # then its factors are its own, not the Xeon's, and none exceeds the datasheet
    assert "epyc-milan" in milan.basis and "nearest relative" not in milan.basis
    assert milan.compute_eff != xeon.compute_eff
    assert 0 < milan.compute_eff <= 1 and 0 < milan.bandwidth_eff <= 1
    # and it states the error its held-out rows read
    assert all(0 < milan.expected_error[m] < 1 for m in ("ttft", "tpot", "throughput"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [(SAPPHIRE_RAPIDS, "c7i.large"), (MILAN, "c6a.large"), (GENOA, "m7a.medium")],
)
def test_the_local_engine_counts_as_the_slice_of_one_physical_core(cpus, text, expected):
    # given a machine of any vCPUs whose engine runs pinned to one core
    cpu = parse_cpuinfo(text, 16)
    # when the instance the engine counts as is read
    here = local_instance(cpus, cpu, cores=ENGINE_CORES)
    # then it is the size of one physical core: 2 vCPUs where a core runs two threads, 1 on an EPYC Genoa (whose
    # instances give each vCPU a whole core)
    assert here is not None and here.instance_type == expected


def test_this_machine_counts_as_its_processors_one_core_slice():
    # given this machine, whatever its vCPUs (the engine runs pinned to one core)
    here = this_machine(ENGINE_CORES)
    # then it is no instance (a CPU the catalog does not know) or the one-core size of its processor's first family
    assert (
        here is None
        or local_instance(shipped_cpus(), parse_cpuinfo(CPUINFO.read_text()), ENGINE_CORES) == here
    )
