"""Is this request from Slack? Slack signs every request with the app's signing secret (v0, HMAC-SHA256 over
`v0:{timestamp}:{body}`); `slack_sdk.signature.SignatureVerifier` checks the signature in constant time and
refuses timestamps more than five minutes away from now. On top of that, a signature seen once is refused the
second time (a replay inside those five minutes), through a guard with a conditional write."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Protocol

from botocore.exceptions import ClientError
from pydantic import SecretStr
from slack_sdk.signature import Clock, SignatureVerifier

from sizing.base import table
from sizing.base.aws import DynamoTable
from sizing.base.errors import SizingError

#: Slack's replay window: requests whose timestamp is more than five minutes from now are refused
#: (docs.slack.dev/authentication/verifying-requests-from-slack; also SignatureVerifier's own bound).
REPLAY_WINDOW_S = 5 * 60
#: Seen signatures are kept a little longer than the window so that clock skew cannot reopen it.
SEEN_TTL_S = 2 * REPLAY_WINDOW_S
TIMESTAMP_HEADER = "x-slack-request-timestamp"
SIGNATURE_HEADER = "x-slack-signature"
#: A v0 signature is "v0=" and 64 hex digits; anything much longer is not a signature.
MAX_SIGNATURE_CHARS = 80


class Unauthorized(SizingError):
    """The request is not (or no longer) a genuine Slack request (HTTP 401). The message never says which check
    failed beyond a coarse reason, and never includes the signature or the secret."""


class ReplayGuard(Protocol):
    def first_time(self, signature: str, timestamp: int) -> bool:
        """Record the signature; False when it was already recorded."""
        ...


class MemoryReplayGuard:
    """In-process guard (tests, `sizing serve`)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._seen: dict[str, float] = {}
        self._clock = clock

    # the ReplayGuard interface; this guard keys on the signature alone
    def first_time(self, signature: str, timestamp: int) -> bool:  # noqa: ARG002
        now = self._clock()
        self._seen = {s: t for s, t in self._seen.items() if t > now}
        if signature in self._seen:
            return False
        self._seen[signature] = now + SEEN_TTL_S
        return True


class DynamoReplayGuard(DynamoTable):
    """Guard on the sizing table: a conditional put of `PK=SLACKSIG#{signature}` that fails when the item
    exists; the item expires through the table's TTL attribute."""

    def first_time(self, signature: str, timestamp: int) -> bool:
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item={
                    **{k: {"S": v} for k, v in table.slack_signature_key(signature).items()},
                    "type": {"S": "slack_signature"},
                    "expires_at": {"N": str(int(timestamp) + SEEN_TTL_S)},
                },
                ConditionExpression="attribute_not_exists(PK)",
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True


class _Clock(Clock):
    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now

    def now(self) -> float:
        return self._now()


def verify_request(
    body: str,
    headers: Mapping[str, str],
    signing_secret: SecretStr,
    *,
    replay_guard: ReplayGuard,
    now: Callable[[], float] = time.time,
) -> None:
    """Raise Unauthorized unless `body` carries a valid, fresh, first-seen Slack signature."""
    lowered = {k.lower(): v for k, v in (headers or {}).items()}
    timestamp = lowered.get(TIMESTAMP_HEADER)
    signature = lowered.get(SIGNATURE_HEADER)
    if not timestamp or not signature:
        raise Unauthorized("missing Slack signature headers", code="unauthorized")
    # non-ASCII is malformed too: hmac.compare_digest raises TypeError on it (it was a 502 through the handler)
    if (
        not (timestamp.isascii() and timestamp.isdigit() and signature.isascii())
        or len(signature) > MAX_SIGNATURE_CHARS
    ):
        raise Unauthorized("malformed Slack signature headers", code="unauthorized")
    if abs(now() - int(timestamp)) > REPLAY_WINDOW_S:
        raise Unauthorized("stale Slack request (timestamp outside five minutes)", code="unauthorized")
    verifier = SignatureVerifier(signing_secret.get_secret_value(), clock=_Clock(now))
    if not verifier.is_valid(body=body, timestamp=timestamp, signature=signature):
        raise Unauthorized("invalid Slack signature", code="unauthorized")
    if not replay_guard.first_time(signature, int(timestamp)):
        raise Unauthorized("replayed Slack request", code="unauthorized")
