"""The table's definition, read from `template.yaml` (the one place it is written), for local and test tables.

The template uses CloudFormation short tags (`!Ref`, `!Sub`, ...) that a plain YAML loader rejects; the loader
here keeps them as `{"Fn::...": value}` mappings so the table's properties can be read as data.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from sizing.errors import InvalidInput

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

TABLE_RESOURCE = "SizingTable"
#: layers/sizing/sizing/store/schema.py → the repository root holding template.yaml.
#: (Installed elsewhere, e.g. in a Lambda layer at /opt/python, there is no template; the path is then unused.)
_PARENTS = Path(__file__).resolve().parents
REPO_ROOT = _PARENTS[4] if len(_PARENTS) > 4 else _PARENTS[-1]
DEFAULT_TEMPLATE = REPO_ROOT / "template.yaml"


class _CfnLoader(yaml.SafeLoader):
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


def load_template(path: str | Path = DEFAULT_TEMPLATE) -> dict[str, Any]:
    p = Path(path)
    try:
        with p.open() as fh:
            data = yaml.load(fh, Loader=_CfnLoader)  # a SafeLoader subclass
    except OSError as exc:
        raise InvalidInput(f"cannot read {p}: {exc.strerror}") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{p} is not a template (no mapping at the top level)")
    return data


def table_definition(
    template_path: str | Path = DEFAULT_TEMPLATE, table_name: str = "llm-sizing-local"
) -> dict:
    """`create_table` arguments for the template's table, under `table_name`, plus its TTL attribute (key
    `TimeToLiveAttribute`, None when the template enables none)."""
    resource = load_template(template_path).get("Resources", {}).get(TABLE_RESOURCE)
    if not resource:
        raise InvalidInput(f"{template_path} has no {TABLE_RESOURCE} resource")
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
    client: DynamoDBClient, table_name: str = "llm-sizing-local", template_path: str | Path = DEFAULT_TEMPLATE
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
