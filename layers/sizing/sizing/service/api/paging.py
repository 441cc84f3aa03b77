"""Page cursors of the listings (GET /runs, GET /watches): the creation time and id of the last item of a page.

`next_token` is `{created_at}~{id}` (e.g. `2026-12-01T20:38:15.123456Z~6f1c...`). Any string of that form is a
position in the listing -- the page after it -- whether or not that item still exists, so every token the
document's pattern allows is answered (DynamoDB's ExclusiveStartKey is a position, not a lookup). The store's
own opaque tokens (earlier `next_token`s) are still accepted; anything else is refused as not a token.
"""

from __future__ import annotations

import re

from sizing.base import table
from sizing.base.errors import InvalidInput, Problem
from sizing.store.repository import decode_token, encode_token

#: A cursor: a UTC timestamp with microseconds (as the store writes `created_at`), `~`, an id (the route's id
#: pattern). `~` rather than the index's own `#`, which would start a URL fragment in `?token=`.
CURSOR_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z~[A-Za-z0-9_-]{1,80}$"
_CURSOR = re.compile(CURSOR_PATTERN)
#: Largest `token` accepted: a cursor is ~110 characters; earlier opaque tokens ~250.
MAX_TOKEN_CHARS = 2048


def to_store(token: str | None, index_pk: str, pk_prefix: str, sk: str) -> str | None:
    """The store's token for an API cursor (an earlier opaque token passes through, for the store to check)."""
    if token == "":
        raise InvalidInput("the page token is empty", [Problem("token", "omit it for the first page")])
    if token is None or not _CURSOR.match(token):
        return token
    created_at, item_id = token.split("~", 1)
    return encode_token(
        index_pk,
        {table.PK: f"{pk_prefix}{item_id}", table.SK: sk, table.GSI1SK: table.listed(created_at, item_id)},
    )


def from_store(token: str | None, index_pk: str) -> str | None:
    """The API cursor for the store's next-page token."""
    if token is None:
        return None
    return str(decode_token(token, index_pk)["GSI1SK"]["S"]).replace("#", "~", 1)
