"""This machine's CPU, as the engine tier reads it: which catalog instance it counts as
(`sizing.catalog.hostcpu`), and whether it has AMX."""

from __future__ import annotations

from sizing.catalog.hostcpu import ENGINE_CORES, LocalInstance, host_cpu, this_machine


def box_cpu() -> tuple[str, bool]:
    """This machine's CPU model name, and whether it has AMX (`amx_bf16`): the mark of the Sapphire Rapids Xeon a
    c7i.large is (docs/engine.md, "Which instance this is"). The engine runs here, so its CPU is this one."""
    cpu = host_cpu()
    return cpu.name, "amx_bf16" in cpu.flags


def skip_without_amx(why: str) -> None:
    """Skip the calling test on a CPU without AMX, saying which CPU and `why` the test needs one."""
    import pytest

    name, amx = box_cpu()
    if not amx:
        pytest.skip(
            f"this machine's CPU ({name}) has no AMX: {why} (docs/engine.md, 'Which instance this is')"
        )


def box_instance() -> LocalInstance:
    """The catalog instance the engine on this machine counts as (one physical core of its processor: `ENGINE_CORES`); skips
    the calling test on a CPU the catalog does not know, whose figures would be filed under another's hardware."""
    import pytest

    here = this_machine(ENGINE_CORES)
    if here is None:
        pytest.skip(
            f"this machine's CPU ({host_cpu().describe()}) is no catalog CPU instance (docs/engine.md)"
        )
    return here
