"""The stack files `sizing run` and `sizing serve` deploy on the embedded AWS (template.yaml, the state machine's
definition, the functions' code, the examples) copied into the built `sizing_local` package as package data, so
an installed `sizing` finds them outside a checkout (`sizing_local.files`). Only `sizing_local` carries them: the
Lambda layer is built from layers/sizing/ alone and stays lean. Everything else is configured in pyproject.toml."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
#: where in `sizing_local` the copies go (sizing_local.files.STACK_DIR names the same folder)
STACK_DIR = "stack_files"
#: what the embedded stack reads: the template, what its DefinitionUri and CodeUris name, and the example the
#: workload spec's documentation quotes
STACK_FILES = ("template.yaml", "statemachines/*.json", "functions/*/*.py", "examples/*.yaml")


class BuildWithStackFiles(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return  # an editable install reads the checkout itself
        target = Path(self.build_lib) / "sizing_local" / STACK_DIR
        for pattern in STACK_FILES:
            for source in sorted(ROOT.glob(pattern)):
                dest = target / source.relative_to(ROOT)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, dest)


setup(cmdclass={"build_py": BuildWithStackFiles})
