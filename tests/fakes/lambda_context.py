"""The Lambda context object a handler receives, as the Python runtime builds it (the attributes Powertools reads)."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

REGION = "us-east-1"
ACCOUNT = "123456789012"


def lambda_context(function_name: str, timeout_s: int, memory_mb: int = 1024) -> SimpleNamespace:
    """A context for `function_name` with `timeout_s` of its time left and a request id fixed by the name (logs
    and idempotency records stay the same from one run to the next)."""
    return SimpleNamespace(
        function_name=function_name,
        function_version="$LATEST",
        memory_limit_in_mb=memory_mb,
        invoked_function_arn=f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{function_name}",
        aws_request_id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"lambda:{function_name}")),
        get_remaining_time_in_millis=lambda: timeout_s * 1000,
    )
