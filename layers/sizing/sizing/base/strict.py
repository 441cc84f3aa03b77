"""The one base of the models that refuse a key they do not name: what the package writes (a typo in a producer
fails its tests instead of a run) and what a caller sends it (an unknown key is named in the error instead of
passing unread). Models that read a payload assembled elsewhere (Step Functions, EventBridge) ignore extra keys
and say so on their own config."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """A model that refuses unknown keys (`extra="forbid"`)."""

    model_config = ConfigDict(extra="forbid")
