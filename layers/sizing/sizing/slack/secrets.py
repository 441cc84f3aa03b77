"""The Slack app's secrets (signing secret, bot token), read from Secrets Manager through Powertools Parameters
with caching. The values are wrapped in `SecretStr` so that a log line, a repr or an exception message never
shows them; only `reveal()` at the point of use does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict, Field, SecretStr, ValidationError

from sizing.base.errors import InvalidInput, Problem, Unavailable
from sizing.base.observability import logger
from sizing.base.strict import Lenient

if TYPE_CHECKING:
    from mypy_boto3_secretsmanager import SecretsManagerClient


class SlackCredentials(Lenient):
    """The secret's JSON document. Extra keys (app id, client secret) may live beside these and are ignored."""

    # read once per cold start and shared by every request the function serves: never changed after
    model_config = ConfigDict(frozen=True)

    signing_secret: SecretStr = Field(min_length=1)
    bot_token: SecretStr = Field(min_length=1)


class SlackSecrets:
    """Reads the credentials secret; Powertools caches the value for `max_age_s` seconds per container."""

    def __init__(self, secret_id: str, *, max_age_s: int, client: SecretsManagerClient | None = None) -> None:
        self.secret_id = secret_id
        self.max_age_s = max_age_s
        self._client = client
        self._provider: Any = None

    def _get(self) -> SlackCredentials:
        from aws_lambda_powertools.utilities.parameters import SecretsProvider
        from aws_lambda_powertools.utilities.parameters.exceptions import (
            GetParameterError,
            TransformParameterError,
        )

        if self._provider is None:
            self._provider = SecretsProvider(boto3_client=self._client)
        try:
            raw = self._provider.get(self.secret_id, max_age=self.max_age_s, transform="json")
        except (GetParameterError, TransformParameterError):
            logger.exception("could not read the Slack secret")
            raise Unavailable("the Slack app's credentials could not be read; try again later") from None
        try:
            return SlackCredentials.model_validate(raw)
        except ValidationError:
            # The validation error would quote the input (the secret) — say only which keys are expected.
            raise InvalidInput(
                "the Slack secret must be a JSON object with signing_secret and bot_token",
                [Problem("SLACK_SECRET_ID", "missing signing_secret or bot_token")],
            ) from None

    def signing_secret(self) -> SecretStr:
        return self._get().signing_secret

    def bot_token(self) -> SecretStr:
        return self._get().bot_token


class StaticSecrets:
    """Fixed credentials (tests and `sizing serve` with a local fake Slack)."""

    def __init__(self, signing_secret: str, bot_token: str) -> None:
        self._creds = SlackCredentials(
            signing_secret=SecretStr(signing_secret), bot_token=SecretStr(bot_token)
        )

    def signing_secret(self) -> SecretStr:
        return self._creds.signing_secret

    def bot_token(self) -> SecretStr:
        return self._creds.bot_token
