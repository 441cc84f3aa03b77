"""Shared bases of the adapters over the product's DynamoDB table and EventBridge bus: the boto3 client is made
on first use (never at import, so handlers start fast) and can be injected (tests, the embedded AWS)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_events import EventBridgeClient


class DynamoTable:
    """An adapter over `table_name`; `client` is a boto3 DynamoDB client (made lazily when not given)."""

    def __init__(self, table_name: str, client: DynamoDBClient | None = None) -> None:
        self.table_name = table_name
        self._client = client

    @property
    def client(self) -> DynamoDBClient:
        if self._client is None:
            import boto3

            self._client = boto3.client("dynamodb")
        return self._client


class EventBus:
    """An adapter publishing on `bus_name`; `client` is a boto3 EventBridge client (made lazily when not given)."""

    def __init__(self, bus_name: str, client: EventBridgeClient | None = None) -> None:
        self.bus_name = bus_name
        self._client = client

    @property
    def client(self) -> EventBridgeClient:
        if self._client is None:
            import boto3

            self._client = boto3.client("events")
        return self._client


def tag_map(tags: list[dict[str, str]]) -> dict[str, str]:
    """AWS's tag list (`[{"Key": ..., "Value": ...}]`) as a dict."""
    return {t["Key"]: t["Value"] for t in tags}


def paged(client: Any, operation: str, key: str) -> Iterator[dict[str, Any]]:
    """Every item of a paginated AWS list call (`key`: the list's name in each page)."""
    for page in client.get_paginator(operation).paginate():
        yield from page.get(key, [])
