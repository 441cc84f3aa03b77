"""Shared fixtures: paths to events/ and examples/, and a clean AWS environment for moto."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
EVENTS = ROOT / "events"
EXAMPLES = ROOT / "examples"

# Never let a test reach a real AWS account: fake credentials, a fixed region, tracing off.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_SECURITY_TOKEN", "testing")
os.environ.setdefault("AWS_SESSION_TOKEN", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "LLMSizing")
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "llm-sizing")


def load_event(name: str) -> dict[str, Any]:
    """A sample event from events/ by name (with or without .json)."""
    path = EVENTS / (name if name.endswith(".json") else f"{name}.json")
    return json.loads(path.read_text())


@pytest.fixture
def event():
    return load_event


@pytest.fixture
def examples_dir() -> Path:
    return EXAMPLES
