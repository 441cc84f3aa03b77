"""Event-driven re-sizing on new model releases.

A `ModelReleased` event (published by anyone on the project's EventBridge bus, or by the scheduled Hugging Face
Hub poller) adds the model to the catalog from its config.json, then re-sizes every watch whose model pattern
matches: estimate, compare with the watch's current best, start a measured run when the watch asks for one, and
notify. Modules: `events` (event shapes), `watches` (saved workloads), `catalog` (models added at runtime),
`compare` (the one-line verdict), `notify` (EventBridge and Slack ports), `hub` (Hugging Face Hub client),
`poller` (new-model detection), `service` (the release handler's logic).
"""

from sizing.releases.catalog import ModelRegistry, with_models
from sizing.releases.compare import Comparison, compare
from sizing.releases.events import (
    MODEL_RELEASED,
    SIZING_ESTIMATE_READY,
    ModelReleased,
    parse_model_released,
)
from sizing.releases.watches import ReleaseWatch, WatchRequest, WatchService, matches

__all__ = [
    "MODEL_RELEASED",
    "SIZING_ESTIMATE_READY",
    "Comparison",
    "ModelRegistry",
    "ModelReleased",
    "ReleaseWatch",
    "WatchRequest",
    "WatchService",
    "compare",
    "matches",
    "parse_model_released",
    "with_models",
]
