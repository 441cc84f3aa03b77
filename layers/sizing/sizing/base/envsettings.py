"""The base of every function's settings: the environment parsed once into a typed model at cold start (logic
never reads os.environ). Empty variables count as unset; a missing or malformed one fails loudly, by name."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import ClassVar, Self

from pydantic import ConfigDict, ValidationError

from sizing.base.errors import InvalidInput, problems_from_pydantic
from sizing.base.strict import Lenient


class EnvSettings(Lenient):
    # read once at cold start and shared by the function's handlers (frozen); each field is named by its variable
    # (the alias) and may also be given by field name
    model_config = ConfigDict(frozen=True, populate_by_name=True)

    #: Whose environment this is, for the error message ("the API function").
    OWNER: ClassVar[str] = "the function"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        env = os.environ if environ is None else environ
        try:
            return cls.model_validate({k: v for k, v in env.items() if v != ""})
        except ValidationError as exc:
            raise InvalidInput(
                f"{cls.OWNER}'s environment is incomplete", problems_from_pydantic(exc)
            ) from None
