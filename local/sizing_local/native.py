"""Compile the simulator's hot loop to C with mypyc, into this virtual environment (`make`) or into the built Lambda
layer (`make build`).

    .venv/bin/python -m sizing_local.native [--require]
    .venv/bin/python -m sizing_local.native --layer .aws-sam/build/SizingLayer/python --require

The four modules `sizing.perf.native` names are copied under the package name `sizing_native` and compiled there.
The copy is compiled rather than the sources in place, so an edited source is never shadowed by a stale binary:
`sizing.perf.native` compares the digest the copy records with the sources' digest, and runs the Python modules when
the two differ. The compiled package goes to the environment's site-packages. `make clean` removes it with `.venv`.

mypyc ships with mypy (a dev dependency already) and builds with setuptools (a dev dependency for that). It needs
a C compiler and Python's headers. Where either is missing, or the compile fails, the command says so and exits 0, and simulations run as
Python, with the same results, only slower. `--require` makes such a failure exit 1.

For the layer, the copy is compiled by the Lambda runtime's interpreter (`LAYER_RUNTIME`, found on PATH) with the
same mypy version, installed once into `build/` for that interpreter, and only on a machine of the functions'
architecture (`LAYER_ARCHITECTURE`, template.yaml's Globals). The build then runs the tests' scheduler scenarios in
that interpreter against the built layer, compiled and as Python, and fails unless the two agree to the last bit.

Why mypyc and not a hand-written extension: it compiles the same typed source the tests and the Lambda layer
run, so there is one implementation; the tests check that the two agree to the last bit.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
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
#: The Lambda functions' runtime and architecture (template.yaml's Globals; tests/unit/test_perf_native.py keeps the
#: three in step): the layer's compiled copy is built by this interpreter on a machine of this architecture.
LAYER_RUNTIME = "python3.12"
LAYER_ARCHITECTURE = "x86_64"
#: The newest glibc the runtime's OS offers: python3.12 runs on Amazon Linux 2023, whose glibc is 2.34
#: [docs.aws.amazon.com/lambda/latest/dg/lambda-runtimes.html; docs.aws.amazon.com/linux/al2023/release-notes]. A
#: library built here that needs a newer symbol version would not load there.
LAYER_GLIBC = (2, 34)
#: Where the layer's build keeps its compile scratch and the runtime interpreter's mypy (build/ is ignored by git).
LAYER_WORK = ROOT / "build" / "native-layer"
LAYER_TOOLS = ROOT / "build" / "mypyc-tools"
#: The layer's check: the kernel this interpreter picks from the layer, and the tests' scheduler scenarios (every
#: scheduler path, tests/support/replicas.py) simulated with it, as JSON.
LAYER_CHECK = (
    "import json; from sizing.perf.native import KERNEL; from support.replicas import simulated_figures; "
    "print(json.dumps([KERNEL.native, KERNEL.reason, simulated_figures()]))"
)
#: A check run's limit, seconds (the Python run of the scenarios takes a few seconds).
LAYER_CHECK_TIMEOUT_S = 300


def _tail(output: str) -> str:
    """The last FAILURE_TAIL_LINES lines of a failed command's output."""
    return "\n".join(output.strip().splitlines()[-FAILURE_TAIL_LINES:])


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


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


def build(work: Path = WORK, target: Path | None = None, python: str | None = None) -> tuple[bool, str]:
    """Compile and install; returns (whether it worked, what to tell the user). `python`: the interpreter that
    compiles (and will import) the copy, with mypy installed; default this one."""
    target = target or Path(sysconfig.get_paths()["platlib"])
    digest = native.source_digest(SOURCES)
    if _installed_digest(target) == digest:
        return True, f"the compiled hot loop in {target / native.NATIVE_PACKAGE} is built from these sources"
    package = _stage(work, digest)
    options: list[str] = []
    if python is not None:
        # another interpreter's mypy lacks this environment's plugins (pyproject.toml's pydantic.mypy): a blank
        # configuration, which changes no generated code (the options there only tighten type checking)
        (work / "mypyc.ini").write_text("[mypy]\n")
        options = ["--config-file", "mypyc.ini"]
    command = [
        python or sys.executable,
        "-m",
        "mypyc",
        *options,
        *(f"{native.NATIVE_PACKAGE}/{name}.py" for name in native.KERNEL_MODULES),
    ]
    started = time.perf_counter()
    try:
        proc = subprocess.run(command, cwd=work, capture_output=True, text=True, check=False)
    except OSError as exc:
        return False, f"could not run mypyc: {exc}"
    if proc.returncode != 0:
        tail = _tail(proc.stdout + proc.stderr)
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


def _tools(runtime: str) -> tuple[str | None, str]:
    """An interpreter `runtime` with this environment's mypy version (and setuptools) installed: made once under
    LAYER_TOOLS; (its path, or None and why not)."""
    mypy_version = importlib.metadata.version("mypy")
    venv = LAYER_TOOLS / f"{runtime}-mypy-{mypy_version}"
    python = venv / "bin" / "python"
    if (venv / ".ready").exists():
        return str(python), ""
    steps = [
        [runtime, "-m", "venv", "--clear", str(venv)],
        [str(python), "-m", "pip", "install", "--quiet", f"mypy=={mypy_version}", "setuptools>=65"],
    ]
    for step in steps:
        try:
            proc = subprocess.run(step, capture_output=True, text=True, check=False)
        except OSError as exc:
            return None, f"could not run {step[0]}: {exc}"
        if proc.returncode != 0:
            tail = _tail(proc.stdout + proc.stderr)
            return None, f"{' '.join(step[:3])} failed (exit {proc.returncode}):\n{tail}"
    (venv / ".ready").write_text(mypy_version + "\n")
    return str(python), ""


def _scenarios(python: str, layer: Path, compiled: bool) -> tuple[dict | None, str]:
    """The tests' scheduler scenarios simulated by `python` importing the layer: (figures, or None and why not)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", native.ENV_SWITCH)}
    env["PYTHONPATH"] = os.pathsep.join([str(layer), str(ROOT / "tests")])
    if not compiled:
        env[native.ENV_SWITCH] = "0"
    try:
        proc = subprocess.run(
            [python, "-c", LAYER_CHECK],
            env=env,
            cwd=layer,
            capture_output=True,
            text=True,
            check=False,
            timeout=LAYER_CHECK_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"the layer's check did not run: {exc}"
    if proc.returncode != 0:
        tail = _tail(proc.stderr)
        return None, f"the layer's check failed (exit {proc.returncode}):\n{tail}"
    is_native, reason, figures = json.loads(proc.stdout.strip().splitlines()[-1])
    if compiled and not is_native:
        return None, f"{LAYER_RUNTIME} importing the layer runs {reason}, not the compiled copy"
    return figures, ""


def _glibc_needed(libraries: list[Path]) -> tuple[tuple[int, ...] | None, str]:
    """The newest glibc symbol version the libraries need (binutils' objdump reads it), or None and why not."""
    objdump = shutil.which("objdump")
    if objdump is None:
        return None, "objdump (binutils) is not on PATH"
    newest: tuple[int, ...] = (0,)
    for lib in libraries:
        proc = subprocess.run([objdump, "-T", str(lib)], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            return None, f"objdump could not read {lib.name}"
        for found in re.findall(r"GLIBC_([0-9.]+)", proc.stdout):
            newest = max(newest, tuple(int(part) for part in found.split(".")))
    return newest, ""


def build_layer(layer: Path, machine: str | None = None) -> tuple[bool, str]:
    """Compile the hot loop into the built layer's `python/` directory with the Lambda runtime's interpreter, then
    check in that interpreter that the layer simulates with it, as its Python modules do, to the last bit."""
    machine = machine or platform.machine()
    if machine != LAYER_ARCHITECTURE:
        return False, (
            f"the Lambda functions run on {LAYER_ARCHITECTURE} and this machine is {machine}: mypyc compiles for"
            f" the machine it runs on, so build the layer on an {LAYER_ARCHITECTURE} machine"
        )
    if not (layer / "sizing").is_dir():
        return False, f"{layer} holds no built sizing package: run `sam build` first"
    runtime = shutil.which(LAYER_RUNTIME)
    if runtime is None:
        return False, f"{LAYER_RUNTIME}, the Lambda runtime's interpreter, is not on PATH"
    python, why = _tools(runtime)
    if python is None:
        return False, why
    ok, message = build(LAYER_WORK, layer, python)
    if not ok:
        return False, message
    glibc, why = _glibc_needed([*layer.glob("*__mypyc*.so"), *(layer / native.NATIVE_PACKAGE).glob("*.so")])
    if glibc is None:
        return False, f"cannot tell which glibc the compiled copy needs: {why}"
    if glibc > LAYER_GLIBC:
        return (
            False,
            f"the compiled copy needs glibc {_dotted(glibc)}; the Lambda runtime offers {_dotted(LAYER_GLIBC)}",
        )
    # the check runs the runtime's own interpreter, as Lambda does: nothing from the compile's environment
    compiled, why = _scenarios(runtime, layer, compiled=True)
    if compiled is None:
        return False, why
    plain, why = _scenarios(runtime, layer, compiled=False)
    if plain is None:
        return False, why
    differ = sorted(name for name in plain if compiled.get(name) != plain[name])
    if differ:
        return False, f"the compiled layer simulates {', '.join(differ)} differently from its Python modules"
    return True, (
        f"{message}; it needs glibc {_dotted(glibc)} (the runtime has {_dotted(LAYER_GLIBC)}); {LAYER_RUNTIME}"
        f" on {machine} runs it from the layer, and its {len(plain)} scheduler scenarios match the Python"
        " modules' to the last bit"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sizing_local.native", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--require", action="store_true", help="exit 1 when the compile fails")
    parser.add_argument(
        "--layer",
        type=Path,
        metavar="DIR",
        help=f"compile into the built Lambda layer's python/ directory, for {LAYER_RUNTIME} on {LAYER_ARCHITECTURE}",
    )
    args = parser.parse_args(argv)
    ok, message = build_layer(args.layer) if args.layer else build()
    if ok:
        print(message)
        return 0
    whose = "The Lambda layer's simulations" if args.layer else "Simulations"
    print(f"note: {message}\n{whose} run as Python (same results, several times slower).", file=sys.stderr)
    return 1 if args.require else 0


if __name__ == "__main__":
    sys.exit(main())
