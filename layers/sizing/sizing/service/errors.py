"""Service-level errors beyond the domain's own (`sizing.errors`): a body too large, a method a path does not answer, and a dependency (the state
machine) that did not answer. Mapped to HTTP once, in `sizing.service.api.errors`."""

from __future__ import annotations

from sizing.errors import SizingError


class PayloadTooLarge(SizingError):
    """The request body exceeds what any valid request needs (HTTP 413)."""


class MethodNotAllowed(SizingError):
    """A known path asked with a method it does not answer (HTTP 405, with `Allow`)."""


class Unavailable(SizingError):
    """A dependency (Step Functions) failed or is not configured; the request may be retried (HTTP 503)."""
