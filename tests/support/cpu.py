"""This machine's CPU, as the engine tier reads it."""

from __future__ import annotations

from pathlib import Path


def box_cpu() -> tuple[str, bool]:
    """This machine's CPU model name, and whether it has AMX (`amx_bf16`): the mark of the Sapphire Rapids Xeon a
    c7i.large is (docs/engine.md, "Which instance this is"). The engine runs here, so its CPU is this one."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown CPU", False
    name = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "?")
    flags = next((ln for ln in info.splitlines() if ln.startswith("flags")), "")
    return name, "amx_bf16" in flags.split()


def skip_without_amx(why: str) -> None:
    """Skip the calling test on a CPU without AMX, saying which CPU and `why` the test needs one."""
    import pytest

    name, amx = box_cpu()
    if not amx:
        pytest.skip(
            f"this machine's CPU ({name}) has no AMX: {why} (docs/engine.md, 'Which instance this is')"
        )
