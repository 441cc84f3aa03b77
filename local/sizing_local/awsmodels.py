"""AWS service models read once per process.

botocore gives every session its own loader, and a loader caches the service-model JSON it has read. A process
that opens many sessions therefore parses the same files again and again: moto resets boto3's default session at
every `mock_aws`, and a new embedded AWS builds each handler's clients afresh, as a new Lambda container would.
Measured on the integration tier (py-spy, 2 cores): a third of the test workers' samples were spent in
`botocore.loaders` re-reading JSON. One loader per data path, shared by every session, reads each file once;
service models are read-only data, so sharing them changes nothing a client does.
"""

from __future__ import annotations

import functools
from typing import Any


def share_service_models() -> None:
    """Make every botocore session of this process use one loader per data path (idempotent)."""
    import botocore.loaders
    import botocore.session

    current: Any = botocore.session.create_loader
    if getattr(current, "shared_by_sizing", False):
        return
    shared: Any = functools.cache(botocore.loaders.create_loader)
    shared.shared_by_sizing = True
    botocore.session.create_loader = shared
