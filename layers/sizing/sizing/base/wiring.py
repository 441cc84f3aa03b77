"""How every feature is wired: its settings and clients in one typed, frozen bundle, built on first use (never at
import, so handlers import fast) once per container, and replaced as a whole where it is hosted differently.

    services = Wiring(build)           # in the feature's deps module; build() parses the environment
    services().store                   # a handler or router uses the bundle
    with services.override(bundle):    # a test gives its own (moto clients, fakes), for its duration
    services.set(lambda: build(...))   # a long-lived host (`sizing serve`) builds its own for the process

The environment is parsed by the feature's `EnvSettings` model inside `build`, so `init_environment(services)`
(the handlers' first decorator) makes a missing variable fail the cold start, by name, for every feature alike.
The Powertools Idempotency layer over the sizing table is made here too (`idempotency_layer`), once for all.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from sizing.base import table

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class Wiring(Generic[T]):
    """A feature's services: `build()` called once, on first use, and kept for the container's life."""

    def __init__(self, build: Callable[[], T]) -> None:
        self._default = self._build = build
        self._lock = threading.Lock()
        self._built: T | None = None
        self._overrides: list[T] = []

    def __call__(self) -> T:
        if self._overrides:
            return self._overrides[-1]
        if self._built is None:
            with self._lock:  # `sizing serve` answers on several threads: one bundle for all of them
                if self._built is None:
                    self._built = self._build()
        return self._built

    @contextlib.contextmanager
    def override(self, services: T) -> Iterator[T]:
        """Use `services` inside the block (tests); the previous bundle comes back after it."""
        self._overrides.append(services)
        try:
            yield services
        finally:
            self._overrides.remove(services)

    def cache_clear(self) -> None:
        """Forget the built bundle: the next use builds again (a new container; the name is functools.cache's,
        so hosts that reset cached handler state, like the local stack, reset this too)."""
        with self._lock:
            self._built = None

    def set(self, build: Callable[[], T] | None) -> None:
        """Build with `build` from now on, on next use (None: the feature's own builder, from the environment)."""
        with self._lock:
            self._build = build or self._default
            self._built = None


def init_environment(services: Callable[[], Any]) -> Callable[[F], F]:
    """Decorator of a Lambda handler: build the feature's services (parsing its environment) before the first
    event, so a missing or malformed variable fails the cold start loudly rather than the first request that
    needs it."""

    def decorate(handler: F) -> F:
        @functools.wraps(handler)
        def wrapper(event: Any, context: Any) -> Any:
            services()
            return handler(event, context)

        return wrapper  # type: ignore[return-value]

    return decorate


def idempotency_layer(table_name: str, static_pk: str, client: Any) -> DynamoDBPersistenceLayer:
    """Powertools Idempotency records in the sizing table (single-table design: one TTL, one IAM grant, one
    backup policy) under their own partition key `static_pk`, carrying the table's TTL attribute so DynamoDB
    deletes them itself. `client`: the feature's boto3 DynamoDB client."""
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    return DynamoDBPersistenceLayer(
        table_name=table_name,
        key_attr=table.PK,
        sort_key_attr=table.SK,
        static_pk_value=static_pk,
        expiry_attr="expires_at",
        boto3_client=client,
    )
