"""The table's definition, read from `template.yaml` (the one place it is written), for local and test tables.

The template uses CloudFormation short tags (`!Ref`, `!Sub`, ...) that a plain YAML loader rejects; the loader
here keeps them as `{"Fn::...": value}` mappings so the table's properties can be read as data.

Which template: the path a caller passes, else `$SIZING_TEMPLATE`, else the first `template.yaml` in the current
directory or one above it (a checkout of the repository). Where the package is installed (a Lambda layer,
site-packages) says nothing about where a template is, so it is never looked for from this file's location.
"""

from __future__ import annotations

import copy
import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from sizing.base.errors import InvalidInput, Problem

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

TABLE_RESOURCE = "SizingTable"
TEMPLATE_NAME = "template.yaml"
#: Environment variable naming the template to use when none is passed.
TEMPLATE_ENV = "SIZING_TEMPLATE"
#: libyaml's parser when PyYAML was built with it: the template (~1,400 lines) parses in ~0.05 s instead of
#: ~0.7 s with the pure-Python one, which every local stack and test table paid.
_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def find_template(start: str | Path | None = None) -> Path:
    """The template to read: `$SIZING_TEMPLATE` when set, else `template.yaml` in `start` (default: the current
    directory) or the nearest directory above it. InvalidInput naming the template when there is none."""
    named = os.environ.get(TEMPLATE_ENV)
    if named:
        return Path(named)
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / TEMPLATE_NAME).is_file():
            return folder / TEMPLATE_NAME
    raise InvalidInput(
        f"no {TEMPLATE_NAME} in {here} or above: run from a checkout of the repository or set {TEMPLATE_ENV}",
        [Problem("template", f"set {TEMPLATE_ENV} to the path of {TEMPLATE_NAME}")],
    )


def repo_root(start: str | Path | None = None) -> Path:
    """The folder holding the template (and, beside it, the functions/ and statemachine/ it names)."""
    return find_template(start).resolve().parent


class _CfnLoader(_BaseLoader):  # type: ignore[valid-type, misc]
    """SafeLoader that accepts CloudFormation short-form intrinsic functions."""


def _intrinsic(loader: yaml.SafeLoader, tag_suffix: str, node: yaml.Node) -> dict[str, Any]:
    name = "Ref" if tag_suffix == "Ref" else f"Fn::{tag_suffix}"
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {name: value}


_CfnLoader.add_multi_constructor("!", _intrinsic)


@functools.lru_cache(maxsize=8)
# `mtime_ns` and `size` key the cache: a changed file is parsed again
def _parsed(path: Path, mtime_ns: int, size: int) -> Any:  # noqa: ARG001
    """One parse per file version (the key changes when the file does)."""
    with path.open() as fh:
        return yaml.load(fh, Loader=_CfnLoader)  # a SafeLoader subclass


def load_template(path: str | Path | None = None) -> dict[str, Any]:
    """The template as data (a copy: callers may change it). `path` defaults to `find_template()`."""
    p = Path(path) if path is not None else find_template()
    try:
        stat = p.stat()
        data = _parsed(p.resolve(), stat.st_mtime_ns, stat.st_size)
    except OSError as exc:
        raise InvalidInput(f"cannot read {p}: {exc.strerror}") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{p} is not a template (no mapping at the top level)")
    return copy.deepcopy(data)


def table_definition(
    template_path: str | Path | None = None, table_name: str = "llm-sizing-local"
) -> dict[str, Any]:
    """`create_table` arguments for the template's table, under `table_name`, plus its TTL attribute (key
    `TimeToLiveAttribute`, None when the template enables none)."""
    resource = load_template(template_path).get("Resources", {}).get(TABLE_RESOURCE)
    if not resource:
        raise InvalidInput(f"{template_path or find_template()} has no {TABLE_RESOURCE} resource")
    props = resource["Properties"]
    definition: dict[str, Any] = {
        "TableName": table_name,
        "AttributeDefinitions": props["AttributeDefinitions"],
        "KeySchema": props["KeySchema"],
        "BillingMode": props.get("BillingMode", "PAY_PER_REQUEST"),
    }
    if props.get("GlobalSecondaryIndexes"):
        definition["GlobalSecondaryIndexes"] = props["GlobalSecondaryIndexes"]
    ttl = props.get("TimeToLiveSpecification") or {}
    definition["TimeToLiveAttribute"] = ttl.get("AttributeName") if ttl.get("Enabled") else None
    return definition


def create_table(
    client: DynamoDBClient,
    table_name: str = "llm-sizing-local",
    template_path: str | Path | None = None,
) -> str:
    """Create the template's table (and its TTL) under `table_name`; returns the name."""
    definition = table_definition(template_path, table_name)
    ttl_attr = definition.pop("TimeToLiveAttribute")
    client.create_table(**definition)
    client.get_waiter("table_exists").wait(TableName=table_name)
    if ttl_attr:
        client.update_time_to_live(
            TableName=table_name, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl_attr}
        )
    return table_name
