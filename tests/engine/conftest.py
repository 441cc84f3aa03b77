"""The engine tier: tests against the real engine (vLLM's CPU build serving a model built in engine/), which
`make test-engine` starts on loopback and names in $SIZING_ENGINE_URL. The product reaches it over HTTP only.

The box is shared and drifts (the same level's TPOT at one stream ranged 6-18 ms across runs minutes apart), so
every comparison here is within one run: the load generator against the server's own /metrics over the same
window, never against a figure from another run."""

from __future__ import annotations

import os

import pytest

from sizing.loadtest.server import ServerFacts, probe


@pytest.fixture(scope="session")
def engine_url() -> str:
    url = os.environ.get("SIZING_ENGINE_URL")
    if not url:
        pytest.skip("no engine: run `make test-engine` (or `make engine` and set SIZING_ENGINE_URL)")
    return url.rstrip("/")


@pytest.fixture(scope="session")
def engine_facts(engine_url: str) -> ServerFacts:
    return probe(engine_url)
