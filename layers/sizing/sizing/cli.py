"""`sizing` command line. Each command group lives in `sizing.commands.<name>` and registers itself; this module
only builds the parser, dispatches, and turns domain errors into exit code 2 with a readable message."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

#: Process settings the CLI takes before pydantic or numpy load (a user's own value wins), as the functions take
#: them from template.yaml's Globals. The project registers no pydantic plugin, and without this pydantic scans
#: every installed distribution's entry points for one on the first model it builds (~0.1 s of `sizing predict`
#: on this venv); the simulator does no BLAS work, so OpenBLAS's thread pool, one thread per core started at
#: `import numpy`, only spends CPU (~0.1 s of CPU time per process on 2 cores).
PROCESS_ENVIRONMENT = {"PYDANTIC_DISABLE_PLUGINS": "__all__", "OPENBLAS_NUM_THREADS": "1"}
for _name, _value in PROCESS_ENVIRONMENT.items():
    os.environ.setdefault(_name, _value)

from sizing.base.errors import SizingError  # noqa: E402 -- after the process settings above

#: Command modules, imported lazily so `sizing predict` does not pay for boto3 or the HTTP server.
#: Each module has `register(subparsers)` which adds its commands with `set_defaults(func=...)`.
COMMAND_MODULES: dict[str, str] = {
    "workload": "sizing.commands.workload",
    "catalog": "sizing.commands.catalog",
    "predict": "sizing.commands.predict",
    "calibrate": "sizing.commands.calibrate",
    "estimate": "sizing.commands.estimate",
    "serve": "sizing.commands.serve",
    "twin": "sizing.commands.twin",
    "loadtest": "sizing.commands.loadtest",
    "manifests": "sizing.commands.manifests",
    "run": "sizing.commands.run",
    "steps": "sizing.commands.steps",
}

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT)


def _available(argv: Sequence[str]) -> dict[str, str]:
    """Only import the module of the command being run (fast start); all of them for --help."""
    wanted = next((a for a in argv if not a.startswith("-")), None)
    if wanted in COMMAND_MODULES:
        return {wanted: COMMAND_MODULES[wanted]}
    return COMMAND_MODULES


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="sizing", description="LLM Sizing: what to run an LLM workload on, and what it costs."
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for module in _available(argv).values():
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:  # command not built yet
                continue
            raise
        mod.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(args_list)
    args = parser.parse_args(args_list)
    try:
        rc = args.func(args)
    except SizingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`sizing estimate ... | head`): stop quietly, as other command-line tools do, and
        # point stdout at nothing so the interpreter's own flush at exit does not fail on the closed pipe again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a command killed by a closed pipe
    return int(rc or 0)


if __name__ == "__main__":
    raise SystemExit(main())
