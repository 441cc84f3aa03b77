"""`sizing catalog instances|models|accelerators [--json]`, `refresh-prices`, `add-model`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from sizing.base.errors import InvalidInput, Problem
from sizing.base.text import table
from sizing.catalog.hf import model_from_config
from sizing.catalog.loading import DATA_DIR, OVERLAY_ENV, load_catalog, reset_cache
from sizing.catalog.models import Catalog
from sizing.catalog.pricing import apply_prices, fetch_prices
from sizing.commands.output import print_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("catalog", help="list or update the catalogs")
    csub = p.add_subparsers(dest="catalog_command", required=True, parser_class=type(p))
    for name in ("instances", "models", "accelerators"):
        q = csub.add_parser(name, help=f"list {name}")
        q.add_argument("--json", action="store_true")
        q.add_argument("--region", default="us-east-1", help="price region (instances)")
        q.set_defaults(func=_list, what=name)
    r = csub.add_parser("refresh-prices", help="update on-demand prices from the AWS Pricing API")
    r.add_argument("--region", default="us-east-1")
    r.add_argument("--dry-run", action="store_true", help="show what would change, write nothing")
    r.set_defaults(func=_refresh)
    a = csub.add_parser("add-model", help="add a model from its Hugging Face config.json")
    a.add_argument("config", help="path to config.json")
    a.add_argument("--id", required=True, help="the model's Hugging Face id, org/name")
    a.add_argument("--alias", action="append", default=[], help="another name for it (repeatable)")
    a.add_argument(
        "--catalog-dir",
        default=os.environ.get(OVERLAY_ENV),
        help=f"write to this overlay directory (default ${OVERLAY_ENV}, else the shipped catalog)",
    )
    a.set_defaults(func=_add_model)


def catalog_rows(cat: Catalog, what: str, region: str = "us-east-1") -> list[dict[str, Any]]:
    """Flat rows for listings (CLI and API share them)."""
    if what == "instances":
        rows = []
        for i in cat.instances.values():
            acc = cat.accelerator_of(i)
            price = i.price(region)
            rows.append(
                {
                    "instance_type": i.instance_type,
                    "family": i.family,
                    "accelerator": acc.id,
                    "accelerator_count": i.accelerator_count,
                    "devices": cat.devices(i),
                    "accelerator_memory_gb": round(acc.memory_gb * i.accelerator_count, 1),
                    "vcpu": i.vcpu,
                    "memory_gib": i.memory_gib,
                    "network_gbps": i.network_gbps,
                    "usd_per_hour": price.usd_per_hour,
                    "price_as_of": str(price.as_of),
                    "price_assumed": price.assumed,
                    "spot_discount": i.spot_discount.fraction,
                    "spot_discount_assumed": i.spot_discount.assumed,
                }
            )
        return rows
    if what == "models":
        return [
            {
                "id": m.id,
                "aliases": m.aliases,
                "params_b": m.params_b,
                "active_params_b": m.active_params_b,
                "layers": m.layers,
                "kv_heads": m.num_key_value_heads,
                "head_dim": m.head_dim,
                "max_context": m.max_position_embeddings,
                "moe_experts": m.moe.num_experts if m.moe else None,
                "kv_bytes_per_token_bf16": int(m.kv_bytes_per_token()),
            }
            for m in cat.models.values()
        ]
    return [
        {
            "id": a.id,
            "name": a.name,
            "memory_gb": a.memory_gb,
            "memory_bw_gbs": a.memory_bw_gbs,
            "bf16_tflops": a.bf16_tflops,
            "fp8_tflops": a.fp8_tflops,
            "int8_tops": a.int8_tops,
            "interconnect": a.interconnect.kind,
            "cores_per_chip": a.cores_per_chip,
            "assumed": a.assumed,
        }
        for a in cat.accelerators.values()
    ]


def _list(args: argparse.Namespace) -> int:
    rows = catalog_rows(load_catalog(), args.what, args.region)
    if args.json:
        print_json(rows)
        return 0
    cols = {
        "instances": [
            "instance_type",
            "accelerator",
            "accelerator_count",
            "accelerator_memory_gb",
            "usd_per_hour",
        ],
        "models": ["id", "params_b", "active_params_b", "layers", "kv_heads", "max_context"],
        "accelerators": ["id", "memory_gb", "memory_bw_gbs", "bf16_tflops", "fp8_tflops", "interconnect"],
    }[args.what]
    print(table(cols, [[r[c] for c in cols] for r in rows]))
    return 0


def _refresh(args: argparse.Namespace) -> int:
    path = DATA_DIR / "instances.yaml"
    doc = yaml.safe_load(path.read_text())
    try:
        prices = fetch_prices([e["instance_type"] for e in doc["instances"]], args.region)
    except Exception as exc:  # botocore's credential and endpoint errors: one line, exit 2
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

        if isinstance(exc, NoCredentialsError):
            print(
                "sizing catalog refresh-prices: no AWS credentials found (the Pricing API needs an account:"
                " set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY); the price snapshot is unchanged",
                file=sys.stderr,
            )
            return 2
        if isinstance(exc, (BotoCoreError, ClientError)):
            print(
                f"sizing catalog refresh-prices: the AWS Pricing API refused the request: {exc}",
                file=sys.stderr,
            )
            return 2
        raise
    changed = apply_prices(doc, args.region, prices)
    missing = sorted(k for k, v in prices.items() if v is None)
    print(f"{len(changed)} prices changed in {args.region}: {', '.join(changed) or 'none'}")
    if missing:
        print(f"no on-demand price listed for: {', '.join(missing)} (kept as they were)")
    if not args.dry_run and changed:
        _atomic_write(path, yaml.safe_dump(doc, sort_keys=False, width=140))
        reset_cache()
    return 0


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _add_model(args: argparse.Namespace) -> int:
    try:
        config = json.loads(Path(args.config).read_text())
    except OSError as exc:
        raise InvalidInput(
            f"cannot read {args.config}: {exc.strerror}", [Problem("config", args.config)]
        ) from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{args.config} is not JSON: {exc}", [Problem("config", "not JSON")]) from None
    spec = model_from_config(config, args.id)
    spec = spec.model_copy(update={"aliases": list(args.alias)})
    target_dir = Path(args.catalog_dir) if args.catalog_dir else DATA_DIR
    target_dir.mkdir(parents=True, exist_ok=True)
    path = target_dir / "models.yaml"
    doc = yaml.safe_load(path.read_text()) if path.exists() else {"models": []}
    entry = spec.model_dump(mode="json", exclude_none=True)
    doc["models"] = [m for m in doc.get("models", []) if m["id"] != spec.id] + [entry]
    _atomic_write(path, yaml.safe_dump(doc, sort_keys=False, width=140))
    reset_cache()
    print(
        f"added {spec.id} to {path}: {spec.params_b:g}B parameters ({spec.active_params_b:g}B active),"
        f" {spec.layers} layers, {spec.num_key_value_heads} KV heads, context {spec.max_position_embeddings:,}"
    )
    return 0
