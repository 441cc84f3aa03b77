"""What one core of this machine reads from memory: the ceiling a CPU slice's decode can reach while the socket's
other cores leave the memory controllers alone, which the catalog states per physical core (`core_memory_bw_gbs` in
layers/sizing/sizing/catalog/data/cpus.yaml; a slice's vCPU share of the socket is the floor when they do not).

    taskset -c 0 .venv/bin/python benchmarks/membw.py [--gib 2] [--repeats 5]

Reads an array several times the size of the last-level cache (a sum: one read of every byte) and copies half of it
(a read and a write of every byte), on the core it is pinned to, and prints the best of the repeats in GB/s. Figures
to read, not a timed assertion.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--gib", type=float, default=2.0, help="array size in GiB (default 2: beyond any L3 here)"
    )
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    a = np.ones(int(args.gib * 2**30) // 8, dtype=np.float64)
    a.sum()  # every page touched once before timing
    best_read = 0.0
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        a.sum()
        best_read = max(best_read, a.nbytes / (time.perf_counter() - t0) / 1e9)
    half = a[: a.size // 2]
    b = np.empty_like(half)
    best_copy = 0.0
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        np.copyto(b, half)
        best_copy = max(best_copy, 2 * b.nbytes / (time.perf_counter() - t0) / 1e9)
    cpus = sorted(os.sched_getaffinity(0))
    print(f"{args.gib:g} GiB on CPUs {cpus}, load average {os.getloadavg()[0]:.1f}: read {best_read:.1f} GB/s, "
          f"copy {best_copy:.1f} GB/s (bytes read and written), best of {args.repeats}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
