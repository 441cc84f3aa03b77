"""Compile the simulator's hot loop to C with mypyc, into this virtual environment: `make` runs it.

    .venv/bin/python -m sizing_local.native [--require]

The four modules `sizing.perf.native` names are copied under the package name `sizing_native` and compiled there.
The copy is compiled rather than the sources in place, so an edited source is never shadowed by a stale binary:
`sizing.perf.native` compares the digest the copy records with the sources' digest, and runs the Python modules when
the two differ. The compiled package goes to the environment's site-packages. `make clean` removes it with `.venv`.

mypyc ships with mypy (a dev dependency already) and builds with setuptools (a dev dependency for that). It needs
a C compiler and Python's headers. Where either is missing, or the compile fails, the command says so and exits 0, and simulations run as
Python, with the same results, only slower. `--require` makes such a failure exit 1.

Why mypyc and not a hand-written extension: it compiles the same typed source the tests and the Lambda layer
run, so there is one implementation; the tests check that the two agree to the last bit.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from sizing.perf import native

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "layers" / "sizing" / "sizing" / "perf"
#: Scratch directory of the compile (build/ is ignored by git).
WORK = ROOT / "build" / "native"
#: The file in the installed package naming mypyc's shared library beside it in site-packages (removed on rebuild).
SHARED_MANIFEST = "shared-libraries.txt"
#: Lines of the compiler's output shown when it fails.
FAILURE_TAIL_LINES = 15


def _stage(work: Path, digest: str) -> Path:
    """The package to compile: a copy of the hot loop's sources, and an __init__ that records their digest."""
    shutil.rmtree(work, ignore_errors=True)
    package = work / native.NATIVE_PACKAGE
    package.mkdir(parents=True)
    for name in native.KERNEL_MODULES:
        shutil.copy2(SOURCES / f"{name}.py", package / f"{name}.py")
    (package / "__init__.py").write_text(
        '"""The simulator\'s hot loop compiled by mypyc from sizing.perf (built by `make`: sizing_local.native).\n'
        'sizing.perf.native uses it only while SOURCE_DIGEST matches the sources."""\n\n'
        f'SOURCE_DIGEST = "{digest}"\n'
    )
    return package


def _put(source: Path, dest: Path) -> Path:
    """Copy `source` to `dest` through a new file renamed over the old one: a process that has the old library
    loaded keeps its mapping (overwriting a loaded shared library in place crashes that process)."""
    partial = dest.with_name(f".{dest.name}.partial")
    shutil.copy2(source, partial)
    os.replace(partial, dest)
    return dest


def _install(work: Path, package: Path, target: Path) -> list[Path]:
    """Copy the compiled package (its __init__ and extension modules, not the copied sources) and mypyc's shared
    library of the group into `target`; returns what was installed."""
    dest = target / native.NATIVE_PACKAGE
    dest.mkdir(parents=True, exist_ok=True)
    manifest = dest / SHARED_MANIFEST
    # the previous build's shared library (its name changes with the sources), then its modules
    previous = manifest.read_text().split() if manifest.exists() else []
    for name in previous:
        (target / Path(name).name).unlink(missing_ok=True)
    for old in dest.iterdir():
        if old.is_file():
            old.unlink()
    installed = [_put(package / "__init__.py", dest / "__init__.py")]
    for ext in [*package.glob("*.so"), *package.glob("*.pyd")]:
        installed.append(_put(ext, dest / ext.name))
    shared = [*work.glob("*__mypyc*.so"), *work.glob("*__mypyc*.pyd")]
    for lib in shared:
        installed.append(_put(lib, target / lib.name))
    manifest.write_text("\n".join(lib.name for lib in shared) + "\n")
    return installed


def _installed_digest(target: Path) -> str | None:
    """The source digest the installed compiled copy records, when a complete copy is installed."""
    dest = target / native.NATIVE_PACKAGE
    init = dest / "__init__.py"
    modules = {ext.name.split(".")[0] for ext in [*dest.glob("*.so"), *dest.glob("*.pyd")]}
    if not init.exists() or not set(native.KERNEL_MODULES) <= modules:
        return None
    found = re.search(r'SOURCE_DIGEST = "([0-9a-f]+)"', init.read_text())
    return found.group(1) if found else None


def build(work: Path = WORK, target: Path | None = None) -> tuple[bool, str]:
    """Compile and install; returns (whether it worked, what to tell the user)."""
    target = target or Path(sysconfig.get_paths()["platlib"])
    digest = native.source_digest(SOURCES)
    if _installed_digest(target) == digest:
        return True, f"the compiled hot loop in {target / native.NATIVE_PACKAGE} is built from these sources"
    package = _stage(work, digest)
    command = [
        sys.executable,
        "-m",
        "mypyc",
        *(f"{native.NATIVE_PACKAGE}/{name}.py" for name in native.KERNEL_MODULES),
    ]
    started = time.perf_counter()
    try:
        proc = subprocess.run(command, cwd=work, capture_output=True, text=True, check=False)
    except OSError as exc:
        return False, f"could not run mypyc: {exc}"
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-FAILURE_TAIL_LINES:])
        return False, f"mypyc failed (exit {proc.returncode}):\n{tail}"
    built = {ext.name.split(".")[0] for ext in [*package.glob("*.so"), *package.glob("*.pyd")]}
    missing = sorted(set(native.KERNEL_MODULES) - built)
    if missing:  # checked before installing: the copy installed now stays until a complete build replaces it
        return False, f"mypyc built no extension module for {', '.join(missing)}"
    _install(work, package, target)
    return True, (
        f"compiled the simulator's hot loop ({', '.join(native.KERNEL_MODULES)}) in "
        f"{time.perf_counter() - started:.0f} s into {target / native.NATIVE_PACKAGE}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sizing_local.native", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--require", action="store_true", help="exit 1 when the compile fails")
    args = parser.parse_args(argv)
    ok, message = build()
    if ok:
        print(message)
        return 0
    print(
        f"note: {message}\nSimulations run as Python (same results, several times slower).", file=sys.stderr
    )
    return 1 if args.require else 0


if __name__ == "__main__":
    sys.exit(main())
