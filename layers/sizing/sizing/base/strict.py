"""The few bases of the package's models, one per way a model treats a key it does not name. A model inherits one
of them instead of repeating a config; a model that sets its own `model_config` over one of them says why beside it.

- `Strict` refuses an unknown key: what the package writes (a typo in a producer fails its tests instead of a run)
  and what a caller sends it (an unknown key is named in the error instead of passing unread).
- `StrictFrozen` is a strict model whose instances never change once built: catalog records, the serving
  configuration.
- `Lenient` ignores an unknown key: a payload assembled elsewhere (Step Functions, EventBridge, Slack, the Hugging
  Face Hub, an OpenAI client, the environment), of which the model reads only what it names.
- `Open` keeps an unknown key: a payload passed on whole, whose named fields are the ones read here."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """A model that refuses unknown keys (`extra="forbid"`)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)


class StrictFrozen(Strict):
    """A strict model whose instances cannot be changed (`frozen=True`): safe to share, cache and hash."""

    model_config = ConfigDict(frozen=True)


class Lenient(BaseModel):
    """A model that ignores unknown keys (`extra="ignore"`, pydantic's default, stated)."""

    model_config = ConfigDict(extra="ignore", defer_build=True)


class Open(BaseModel):
    """A model that keeps unknown keys (`extra="allow"`), passing them on as they came."""

    model_config = ConfigDict(extra="allow", defer_build=True)
