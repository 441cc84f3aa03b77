"""Endpoints for tests that run the API's runs without measuring anything real."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def refusing_endpoint() -> Iterator[str]:
    """The URL of a loopback port held but never listened on, for as long as the block runs: every connection to
    it is refused, and no other test's twin can be given that port meanwhile. Runs that measure it fail their load
    test at its first level, without starting a twin or spending the cores on a real sweep."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{held.getsockname()[1]}"
