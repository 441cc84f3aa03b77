"""The SAM template as tests read it: YAML with CloudFormation's short-form tags (!Ref, !GetAtt, !If, ...) kept as
{"Tag": value}."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


class _CfnLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short-form tags kept as {"Tag": value}."""


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {suffix: value}


_CfnLoader.add_multi_constructor("!", _tag)


def load_template() -> dict[str, Any]:
    """The whole template, tags kept."""
    return dict(yaml.load(TEMPLATE.read_text(), Loader=_CfnLoader))
