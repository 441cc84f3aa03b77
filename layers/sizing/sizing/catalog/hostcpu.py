"""Which catalog CPU instance this machine is a slice of, read from `/proc/cpuinfo`: the processor of
`data/cpus.yaml` whose `cpuinfo` match the machine's vendor, family, model and flags meet, and the size of that
processor's first family with this machine's vCPUs (2 vCPUs of a Sapphire Rapids Xeon: c7i.large; of an EPYC
Milan: c6a.large; of an EPYC Genoa, whose vCPUs are whole cores: m7a.large), or with its number of physical cores
(the local engine's one core: c7i.large, c6a.large, m7a.medium). For the engine on this machine (its tier,
`benchmarks/engine.py`): a server elsewhere does not state its CPU over HTTP, so a run against it names its
hardware (`sizing run --hardware`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True)
class HostCpu:
    """This machine's processor as the kernel states it (the first processor's fields; a VM's are alike)."""

    name: str
    vendor: str
    family: int | None
    model: int | None
    flags: frozenset[str]
    vcpus: int

    def describe(self) -> str:
        return f"{self.name} ({self.vcpus} vCPUs, {'AMX' if 'amx_bf16' in self.flags else 'no AMX'})"


@dataclass(frozen=True)
class LocalInstance:
    """The catalog's processor and instance type this machine counts as."""

    processor: str
    instance_type: str

    @property
    def accelerator(self) -> str:
        """The catalog accelerator of the instance (`<processor>-<instance type>`)."""
        return f"{self.processor}-{self.instance_type}"


def parse_cpuinfo(text: str, vcpus: int | None = None) -> HostCpu:
    """The first processor's model name, vendor, family, model and flags of a `/proc/cpuinfo` text."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor's block is enough
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())

    def number(key: str) -> int | None:
        value = fields.get(key, "")
        return int(value) if value.isdigit() else None

    count = vcpus if vcpus is not None else text.count("\nprocessor") + text.startswith("processor")
    return HostCpu(
        name=fields.get("model name", "unknown CPU"),
        vendor=fields.get("vendor_id", ""),
        family=number("cpu family"),
        model=number("model"),
        flags=frozenset(fields.get("flags", "").split()),
        vcpus=max(1, count),
    )


@cache
def host_cpu() -> HostCpu:
    """This machine's processor (an unreadable `/proc/cpuinfo`: an unknown CPU, which matches no processor), read
    once: every row a benchmark writes names it."""
    try:
        text = CPUINFO.read_text()
    except OSError:
        text = ""
    return parse_cpuinfo(text, os.cpu_count() or 1)


def _matches(cpu: HostCpu, match: dict[str, Any]) -> bool:
    if "vendor" in match and cpu.vendor != match["vendor"]:
        return False
    if "cpu_family" in match and cpu.family != int(match["cpu_family"]):
        return False
    if "models" in match and cpu.model not in {int(m) for m in match["models"]}:
        return False
    return all(flag in cpu.flags for flag in match.get("flags", []))


def local_instance(
    cpus: dict[str, Any], cpu: HostCpu | None = None, cores: int | None = None
) -> LocalInstance | None:
    """The processor of `cpus` (`data/cpus.yaml` as read) whose `cpuinfo` match `cpu` (this machine's by default)
    meets, and its first family's size of `cpu`'s vCPUs, or with `cores`, of that many physical cores (vCPUs: the
    cores times the processor's threads per core); None when no processor or no size matches."""
    cpu = cpu or host_cpu()
    for proc_id, proc in (cpus.get("processors") or {}).items():
        if not proc.get("cpuinfo") or not _matches(cpu, proc["cpuinfo"]):
            continue
        vcpus = cores * int(proc.get("threads_per_core", 1)) if cores else cpu.vcpus
        sizes = [size for size, shape in (cpus.get("sizes") or {}).items() if int(shape["vcpu"]) == vcpus]
        for family, fam in (cpus.get("families") or {}).items():
            if fam["processor"] == proc_id:
                priced = [size for size in sizes if (fam.get("prices") or {}).get(size) is not None]
                return LocalInstance(proc_id, f"{family}.{priced[0]}") if priced else None
    return None


def shipped_cpus() -> dict[str, Any]:
    """The shipped `data/cpus.yaml`, as read."""
    import yaml

    data: dict[str, Any] = yaml.safe_load((Path(__file__).parent / "data" / "cpus.yaml").read_text())
    return data


#: Physical cores of the slice the local engine is: engine/engine.sh pins it to one core (its client on another),
#: whatever else the machine has -- 2 vCPUs where a core runs two threads (c7i.large, c6a.large), one where it runs
#: one (m7a.medium: an EPYC Genoa instance's vCPU is a whole core) (docs/engine.md, "Which instance this is").
ENGINE_CORES = 1


def this_machine(cores: int | None = None) -> LocalInstance | None:
    """The catalog instance this machine counts as (`local_instance` over the shipped `data/cpus.yaml`), or with
    `cores`, the slice of that many physical cores of its processor (`ENGINE_CORES`: the one the local engine is)."""
    return local_instance(shipped_cpus(), host_cpu(), cores)
