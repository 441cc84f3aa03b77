"""This machine's CPU, as the engine tier reads it: which catalog instance it counts as
(`sizing.catalog.hostcpu`), and whether its engine's steps last milliseconds or seconds (bf16 without bf16
arithmetic)."""

from __future__ import annotations

from pathlib import Path

from sizing.base.serving_config import ServerFacts
from sizing.catalog.hostcpu import ENGINE_VCPUS, LocalInstance, host_cpu, this_machine
from sizing.catalog.loading import DATA_DIR, build_catalog
from sizing.loadtest.server import kv_format

#: /proc/cpuinfo flags of bf16 arithmetic (a matrix unit or AVX-512's bf16 instructions)
BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})
#: Where the engine tier writes its models as catalog models (engine/build_models.py)
OVERLAY = Path(__file__).resolve().parents[2] / ".engine" / "models" / "catalog"


def skip_where_bf16_is_emulated(facts: ServerFacts, why: str) -> None:
    """Skip the calling test where the engine's steps last seconds: a CPU without bf16 arithmetic serving the model
    in bf16 (engine/engine.sh serves fp32 there unless told otherwise; the server's KV bytes a token say which,
    `sizing.loadtest.server.kv_format`)."""
    import pytest

    cpu = host_cpu()
    if cpu.flags & BF16_FLAGS:
        return
    served = None
    if facts.served_models and (OVERLAY / "models.yaml").exists():
        catalog = build_catalog(DATA_DIR, OVERLAY)
        name = f"sizing-engine/{facts.served_models[0]}"
        if name in catalog.models:
            served = kv_format(facts, catalog.model(name).kv_bytes_per_token(1.0))
    if served != "fp32":
        pytest.skip(
            f"this machine's CPU ({cpu.name}) has no bf16 arithmetic and the engine serves {served or 'an unknown type'}"
            f" (not fp32): {why} (docs/engine.md, 'fp32 where the CPU has no bf16')"
        )


def box_instance() -> LocalInstance:
    """The catalog instance the engine on this machine counts as (one core: a 2-vCPU slice of its processor); skips
    the calling test on a CPU the catalog does not know, whose figures would be filed under another's hardware."""
    import pytest

    here = this_machine(ENGINE_VCPUS)
    if here is None:
        pytest.skip(
            f"this machine's CPU ({host_cpu().describe()}) is no catalog CPU instance (docs/engine.md)"
        )
    return here
