"""Shared fixtures and the suite's tiers.

Tiers are folders, and each folder's tests carry its markers (applied here, so a file cannot forget them):
  tests/unit         no marker; socket-free (pytest-socket refuses any socket but a Unix one) and moto-free
  tests/integration  `integration`: handlers, store and state machine on moto; twins and Locust on loopback
  tests/reliability  `integration`, and `fuzz` for generated inputs (hypothesis, schemathesis)
  tests/e2e          `e2e`
  tests/engine       `engine`: against the real engine on loopback (`make test-engine` starts it)
`slow` is set per test. Test doubles live in tests/fakes/ (importable as `fakes`). `leftover_children` tells
whether a test left a twin or a load generator running.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import support.selection
from support.events import load_event

from sizing_local.awsmodels import share_service_models

ROOT = Path(__file__).resolve().parents[1]
EVENTS = ROOT / "events"
EXAMPLES = ROOT / "examples"
TESTS = Path(__file__).resolve().parent

# Never let a test reach a real AWS account: fake credentials, a fixed region, tracing off.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_SECURITY_TOKEN", "testing")
os.environ.setdefault("AWS_SESSION_TOKEN", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "LLMSizing")
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "llm-sizing")
# The repository's template, whatever directory a test (or a child process it starts) runs in.
os.environ.setdefault("SIZING_TEMPLATE", str(ROOT / "template.yaml"))
# Every test opens fresh boto3 sessions (moto resets the default one): let them share one reader of the service
# models instead of each parsing botocore's JSON again (see sizing_local/awsmodels.py).
share_service_models()

#: A unit test module that mentions moto is in the wrong tier (tests/integration is moto's).
_MOTO = re.compile(r"^\s*(from|import)\s+moto\b", re.MULTILINE)
_FUZZ_MODULES = ("fuzz", "hostile")
#: Modules whose assertions compare measured latencies with known ones (a few ms of slack): under xdist they
#: share one worker (`--dist loadgroup`), so two of them never load the cores at the same time.
TIMING_MODULES = frozenset(
    {"test_twin_fidelity", "test_loadtest_sweep", "test_loadtest_streams", "test_twin_capacity"}
)
#: Modules whose module-scoped fixture starts a server of its own (`sizing serve`, the embedded AWS): under xdist
#: each module's tests share one worker, so the server starts once (5-8 s each) instead of once per worker that
#: draws one of its tests.
SERVER_MODULES = frozenset({"test_api_serve", "test_reliability_concurrency"})


@pytest.fixture(name="load_event")
def load_event_fixture() -> Callable[[str], dict[str, Any]]:
    """`load_event("api-post-estimates")`: the sample event of that name from events/."""
    return load_event


@pytest.fixture
def event() -> Callable[[str], dict[str, Any]]:
    return load_event


@pytest.fixture
def profile_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A laptop's profile store on a folder of its own (SIZING_CALIBRATION_DIR), no other store in use, and the
    adopted profile's cache cleared after the test."""
    from sizing.learn import profiles

    monkeypatch.setenv(profiles.DIR_ENV, str(tmp_path))
    profiles.use_store(None)
    yield tmp_path
    profiles.invalidate()


@pytest.fixture
def examples_dir() -> Path:
    return EXAMPLES


#: Command lines of the children a local run starts: twins and load generators.
_CHILD_COMMANDS = ("sizing.cli twin", "sizing.orchestrate.loadtask")


def _leftover_children() -> list[str]:
    import psutil

    left = []
    for child in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(child.cmdline())
            if (
                child.is_running()
                and child.status() != psutil.STATUS_ZOMBIE
                and any(c in cmd for c in _CHILD_COMMANDS)
            ):
                left.append(f"{child.pid}: {cmd}")
        except psutil.Error:  # it ended while we looked
            continue
    return left


@pytest.fixture
def leftover_children() -> Callable[[], list[str]]:
    """The twins and load generators this test process (or a child of it) started that are still alive, by
    process -- not by probing their ports, which another test running at the same time may have been given."""
    return _leftover_children


def _tier(path: Path) -> str | None:
    try:
        return path.resolve().relative_to(TESTS).parts[0]
    except (ValueError, IndexError):
        return None


def _is_generated(item: pytest.Item) -> bool:
    fn = getattr(item, "function", None)
    module = item.path.stem
    return bool(getattr(fn, "is_hypothesis_test", False)) or any(m in module for m in _FUZZ_MODULES)


def pytest_configure(config: pytest.Config) -> None:
    support.selection.markexpr = str(config.option.markexpr or "")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    moto_free: dict[Path, bool] = {}
    for item in items:
        tier = _tier(item.path)
        if tier == "unit":
            if item.path not in moto_free:
                moto_free[item.path] = not _MOTO.search(item.path.read_text())
            if not moto_free[item.path]:
                raise pytest.UsageError(
                    f"{item.path.relative_to(ROOT)} uses moto: unit tests are moto-free; "
                    "move it to tests/integration or use tests/fakes"
                )
            item.add_marker(pytest.mark.disable_socket)
        elif tier == "integration":
            item.add_marker(pytest.mark.integration)
            if item.path.stem in TIMING_MODULES:
                item.add_marker(pytest.mark.xdist_group(name="timing"))
        elif tier == "reliability":
            item.add_marker(pytest.mark.integration)
            if _is_generated(item):
                item.add_marker(pytest.mark.fuzz)
        elif tier == "e2e":
            item.add_marker(pytest.mark.e2e)
        elif tier == "engine":
            item.add_marker(pytest.mark.engine)
        if item.path.stem in SERVER_MODULES:
            item.add_marker(pytest.mark.xdist_group(name=item.path.stem))
