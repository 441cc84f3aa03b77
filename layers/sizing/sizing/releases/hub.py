"""A small Hugging Face Hub client: list an organisation's newest models, fetch a model's config.json.

Plain `urllib` with a timeout on every request and bounded retries with exponential backoff on the failures worth
retrying (connection errors, timeouts, 429 and 5xx, honouring Retry-After). Other 4xx answers are permanent (a
gated or deleted repository) and raised at once. Responses are size-capped: a config.json is a few KB.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import ConfigDict, Field, ValidationError

from sizing.base.errors import InvalidInput, Problem, SizingError
from sizing.base.strict import Lenient

HUB_URL = "https://huggingface.co"
#: Seconds to wait for a connection or a read: the Hub answers listings in well under a second; 10 s leaves
#: room for a slow moment without letting one request eat a Lambda's 60 s budget.
TIMEOUT_S = 10.0
#: Attempts per request (1 + 3 retries): with 1 s doubling backoff the worst case waits 1 + 2 + 4 = 7 s.
ATTEMPTS = 4
BACKOFF_S = 1.0
#: Longest single wait, Retry-After included: a longer ban outlasts the poller's run; the next poll retries.
MAX_BACKOFF_S = 30.0
#: Largest body read: a listing of 100 models is ~50 KB, a config.json a few KB; 5 MB refuses anything odd.
MAX_BYTES = 5 * 1024 * 1024
#: Models per listing: the newest 100 of an organisation covers far more than a poll interval's releases.
LIST_LIMIT = 100
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
USER_AGENT = "llm-sizing-release-poller/1.0"


class HubError(SizingError):
    """The Hub did not answer usefully. `permanent` errors (401/403/404: gated, private or deleted) will not go
    away by retrying; the others may."""

    def __init__(self, message: str, *, status: int | None = None, permanent: bool = False) -> None:
        super().__init__(message, [], {"status": status}, "hub_error")
        self.status = status
        self.permanent = permanent


class HubModel(Lenient):
    """One entry of GET /api/models. The Hub adds fields over time, so unknown ones are ignored here (this is
    a response we read, not an input we accept)."""

    # filled from the Hub's JSON by its names (`createdAt`) or by field name (`created_at`)
    model_config = ConfigDict(populate_by_name=True)
    id: str
    created_at: datetime | None = Field(default=None, alias="createdAt")
    private: bool = False
    gated: bool | str = False
    pipeline_tag: str | None = None


class HubClient:
    """GETs against the Hub. `opener` (a urllib opener) and `sleep` are injectable for tests."""

    def __init__(
        self,
        base_url: str = HUB_URL,
        *,
        token: str | None = None,
        timeout_s: float = TIMEOUT_S,
        attempts: int = ATTEMPTS,
        backoff_s: float = BACKOFF_S,
        sleep: Callable[[float], None] = time.sleep,
        opener: urllib.request.OpenerDirector | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self.timeout_s = timeout_s
        self.attempts = max(1, attempts)
        self.backoff_s = backoff_s
        self._sleep = sleep
        self._opener = opener or urllib.request.build_opener()

    # --- API ----------------------------------------------------------------------------------------------
    def list_models(self, author: str, limit: int = LIST_LIMIT) -> list[HubModel]:
        """An organisation's models, newest first."""
        query = urllib.parse.urlencode(
            {"author": author, "sort": "createdAt", "direction": "-1", "limit": str(limit)}
        )
        data = self._get_json(f"{self.base_url}/api/models?{query}")
        if not isinstance(data, list):
            raise HubError(f"the Hub's model listing for {author} is not a list")
        models: list[HubModel] = []
        for entry in data:
            try:
                models.append(HubModel.model_validate(entry))
            except ValidationError:
                continue  # one odd entry must not hide the others
        return models

    def config_url(self, model_id: str, revision: str = "main") -> str:
        return f"{self.base_url}/{urllib.parse.quote(model_id)}/resolve/{urllib.parse.quote(revision)}/config.json"

    def fetch_config(self, model_id: str, revision: str = "main") -> dict[str, Any]:
        return self.fetch_config_url(self.config_url(model_id, revision))

    def fetch_config_url(self, url: str) -> dict[str, Any]:
        """A config.json by URL; only URLs on this client's Hub are fetched (an event's URL is untrusted)."""
        if not url.startswith(self.base_url + "/"):
            raise InvalidInput(
                f"config URLs must be on {self.base_url}",
                [Problem("detail.config", f"not a {self.base_url} URL")],
            )
        data = self._get_json(url)
        if not isinstance(data, dict):
            raise InvalidInput(
                "the config.json at the URL is not a JSON object", [Problem("detail.config", "not an object")]
            )
        return data

    # --- transport ----------------------------------------------------------------------------------------
    def _get_json(self, url: str) -> Any:
        body = self._get(url)
        try:
            return json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise HubError(f"the Hub's answer for {url} is not JSON", permanent=True) from None

    def _get(self, url: str) -> bytes:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        last: HubError | None = None
        for attempt in range(self.attempts):
            if attempt:
                self._sleep(self._delay(attempt, last))
            request = urllib.request.Request(url, headers=headers, method="GET")
            try:
                with self._opener.open(request, timeout=self.timeout_s) as resp:
                    body: bytes = resp.read(MAX_BYTES + 1)
                if len(body) > MAX_BYTES:
                    raise HubError(f"the Hub's answer for {url} exceeds {MAX_BYTES:,} bytes", permanent=True)
                return body
            except urllib.error.HTTPError as exc:
                retry_after = _retry_after(exc.headers.get("Retry-After") if exc.headers else None)
                if exc.code not in RETRY_STATUS:
                    raise HubError(
                        f"the Hub answered {exc.code} for {url}", status=exc.code, permanent=True
                    ) from None
                last = HubError(f"the Hub answered {exc.code} for {url}", status=exc.code)
                last.details["retry_after"] = retry_after
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                last = HubError(f"the Hub did not answer {url}: {_reason(exc)}")
        assert last is not None
        raise last

    def _delay(self, attempt: int, last: HubError | None) -> float:
        """Exponential backoff (1, 2, 4 s ...), or the server's Retry-After when it gives one. No jitter: one
        scheduled poller per stage makes the requests, so there is no herd to spread."""
        hinted = last.details.get("retry_after") if last else None
        delay = hinted if isinstance(hinted, float) else self.backoff_s * 2 ** (attempt - 1)
        return min(delay, MAX_BACKOFF_S)


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    return str(reason or type(exc).__name__)
