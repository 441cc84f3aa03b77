"""CPU families expanded into catalog records: one accelerator (`<processor>-<instance type>`) and one
instance type per size of a family in `data/cpus.yaml`."""

from __future__ import annotations

from typing import Any

#: GB per GiB: instance memory is stated in GiB, accelerator memory in decimal GB.
GB_PER_GIB = 2**30 / 1e9


def expand_cpu_families(cpus: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The accelerators and instance types of `data/cpus.yaml`: one of each per (family, size). A CPU instance is
    one device: its memory less the node's reserve, the memory bandwidth its physical cores (vCPUs / threads per
    core) can draw (each core's, at most the socket's), and the matrix peak of those cores (`matrix_unit`: AMX on a
    Xeon, the AVX2 FMA pipes on an EPYC Milan, AVX-512's bf16 dot products on an EPYC Genoa). A slice of one physical core serves its requests on the core that
    computes the model (`frontend_shares_cores`): vLLM keeps a CPU for its API server and engine core, which on such
    a slice is the other thread of the same core."""
    accelerators: list[dict[str, Any]] = []
    instances: list[dict[str, Any]] = []
    as_of = cpus.get("as_of")
    reserved = float(cpus.get("node_reserved_gib", 0.0))
    for family, fam in (cpus.get("families") or {}).items():
        proc_id = fam["processor"]
        proc = cpus["processors"][proc_id]
        for size, shape in (cpus.get("sizes") or {}).items():
            itype = f"{family}.{size}"
            price = (fam.get("prices") or {}).get(size)
            if price is None:
                continue  # a size without a published price is not offered
            vcpu = int(shape["vcpu"])
            memory_gib = vcpu * float(fam["memory_gib_per_vcpu"])
            cores = vcpu / int(proc["threads_per_core"])
            peak = float(proc["clock_ghz"]) * cores / 1e3  # tera-cycles per second of the slice's cores
            acc_id = f"{proc_id}-{itype}"
            accelerators.append(
                {
                    "id": acc_id,
                    "name": f"{proc['name']}, {vcpu} vCPUs ({itype})",
                    "vendor": proc["vendor"],
                    "kind": "cpu",
                    "cores_per_chip": 1,
                    "memory_gb": round(memory_gib * GB_PER_GIB, 3),
                    "usable_memory_mib": int((memory_gib - reserved) * 1024),
                    "memory_bw_gbs": round(
                        min(float(proc["socket_memory_bw_gbs"]), cores * float(proc["core_memory_bw_gbs"])), 3
                    ),
                    "bf16_tflops": round(float(proc["bf16_flops_per_cycle"]) * peak, 3),
                    "fp32_tflops": round(float(proc["fp32_flops_per_cycle"]) * peak, 3),
                    "bf16_arithmetic": bool(proc.get("bf16_arithmetic", True)),
                    # a processor without an int8 path faster than its bf16 one states none: int8 runs at bf16's rate
                    "int8_tops": (
                        round(float(proc["int8_ops_per_cycle"]) * peak, 3)
                        if proc.get("int8_ops_per_cycle")
                        else None
                    ),
                    "interconnect": {
                        "kind": "none",
                        "bw_gbs_per_direction": 1.0,
                        "allreduce_latency_us": 1.0,
                        "description": "one replica per instance on all its cores (tensor parallel 1): no all-reduce",
                    },
                    "source": proc["source"],
                    "as_of": as_of,
                    "confidence": "medium (datasheet peaks; bandwidth is what the slice's cores read, measured)",
                    "frontend_shares_cores": cores <= 1,
                    "notes": proc.get("notes"),
                }
            )
            instances.append(
                {
                    "instance_type": itype,
                    "family": family,
                    "accelerator": acc_id,
                    "accelerator_count": 1,
                    "vcpu": vcpu,
                    "memory_gib": memory_gib,
                    "network_gbps": float(shape["network_gbps"]),
                    "prices": {
                        "us-east-1": {
                            "usd_per_hour": float(price),
                            # a family read from another snapshot of the price list says which
                            "source": f"{fam.get('price_source', cpus['price_source'])} (us-east-1 row)",
                            "as_of": fam.get("price_as_of", cpus["price_as_of"]),
                        }
                    },
                    "spot_discount": fam["spot_discount"],
                    "source": f"{fam.get('network_source', cpus['network_source'])}; memory:"
                    f" {fam['memory_gib_per_vcpu']} GiB per vCPU",
                    "as_of": as_of,
                }
            )
    return accelerators, instances
