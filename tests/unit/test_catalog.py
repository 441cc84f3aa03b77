"""The catalogs: every entry validates and carries a source and an as-of date, or says it is assumed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from botocore.stub import Stubber

from sizing.base.errors import InvalidInput, NotFound
from sizing.catalog import load_catalog
from sizing.catalog.hf import model_from_config
from sizing.catalog.loading import DATA_DIR, build_catalog
from sizing.catalog.models import Catalog
from sizing.catalog.pricing import apply_prices, fetch_prices

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REQUIRED_FAMILIES = {
    "g4dn",
    "g5",
    "g6",
    "g6e",
    "p4d",
    "p4de",
    "p5",
    "p5e",
    "p5en",
    "p6-b200",
    "inf2",
    "trn1",
    "trn2",
}
REFERENCE_MODELS = [
    "meta-llama/Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B",
    "meta-llama/Llama-3.1-405B",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
    "mistralai/Mixtral-8x7B-v0.1",
    "mistralai/Mixtral-8x22B-v0.1",
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-32B",
    "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3-235B-A22B",
    "openai/gpt-oss-20b",
    "openai/gpt-oss-120b",
    "meta-llama/Llama-3.2-1B",
    "meta-llama/Llama-3.2-3B",
    "mistralai/Mistral-7B-v0.3",
    "Qwen/Qwen2.5-7B-Instruct",
    "Qwen/Qwen2.5-14B-Instruct",
    "Qwen/Qwen2.5-32B-Instruct",
    "Qwen/Qwen2.5-72B-Instruct",
    "google/gemma-2-9b",
    "google/gemma-2-27b",
    "microsoft/Phi-3-mini-128k-instruct",
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
    "deepseek-ai/DeepSeek-R1-Distill-Llama-70B",
]


def test_catalog_covers_the_required_families_and_every_reference_model():
    cat = load_catalog()
    assert {i.family for i in cat.instances.values()} >= REQUIRED_FAMILIES
    for mid in REFERENCE_MODELS:
        assert cat.model(mid).id == mid


def test_every_instance_has_a_sourced_price_or_says_it_is_assumed():
    cat = load_catalog()
    for i in cat.instances.values():
        p = i.price("us-east-1")
        assert p.usd_per_hour and p.usd_per_hour > 0, i.instance_type
        assert p.source and p.as_of, i.instance_type
        assert i.spot_discount.assumed or "assumed" not in i.spot_discount.source
        assert i.source and i.as_of


def test_every_accelerator_model_and_managed_offer_is_sourced():
    cat = load_catalog()
    for a in cat.accelerators.values():
        assert a.source and a.as_of and a.bf16_tflops > 0
        if a.id == "a10g":
            assert "bf16_tflops" in a.assumed  # NVIDIA publishes no A10G tensor figure
    for m in cat.models.values():
        assert m.source and m.as_of
    for o in cat.managed.bedrock_on_demand:
        assert o.source and o.as_of and o.quota.source
        if o.latency:
            assert o.latency.assumed and o.latency.source.startswith("assumed")
    for s in cat.managed.sagemaker:
        assert s.source and s.as_of and s.usd_per_hour > 0


def test_p_family_prices_are_after_the_mid_2025_cut():
    cat = load_catalog()
    assert cat.instance("p5.48xlarge").price("us-east-1").usd_per_hour == pytest.approx(55.04)
    assert cat.instance("p5.48xlarge").price("us-east-1").as_of.isoformat() >= "2025-06-05"


def test_neuron_devices_are_neuron_cores_and_gpu_devices_are_gpus():
    cat = load_catalog()
    assert cat.devices(cat.instance("inf2.48xlarge")) == 24
    assert cat.devices(cat.instance("trn1.32xlarge")) == 32
    assert cat.devices(cat.instance("p5.48xlarge")) == 8


def test_kv_cache_bytes_per_token_of_llama_70b():
    # 2 x 80 layers x 8 KV heads x 128 head dim x 2 bytes
    assert load_catalog().model("llama-3.1-70b").kv_bytes_per_token() == 327_680


def test_missing_region_price_falls_back_to_us_east_1_marked_assumed():
    # given a Region outside the price snapshot (ap-south-1) and a family the snapshot does not sample (p6-b200)
    cat = load_catalog()
    # when
    outside = cat.instance("g5.xlarge").price("ap-south-1")
    unsampled = cat.instance("p6-b200.48xlarge").price("eu-west-1")
    # then: both fall back to us-east-1, marked assumed
    for p in (outside, unsampled):
        assert p.assumed and "us-east-1" in (p.notes or "")


def test_snapshot_region_price_is_the_regions_own():
    # given g5 in Ireland, sampled in the snapshot
    p = load_catalog().instance("g5.xlarge").price("eu-west-1")
    # then
    assert not p.assumed and p.usd_per_hour == pytest.approx(1.006 * 6.33167 / 5.672, rel=1e-4)


def test_sagemaker_price_is_listed_or_derived_and_flagged():
    cat = load_catalog()
    listed = cat.sagemaker_price(cat.instance("g5.12xlarge"))
    assert listed.usd_per_hour == pytest.approx(7.09) and not listed.assumed
    derived = cat.sagemaker_price(cat.instance("g6e.xlarge"))
    assert (
        derived.assumed and derived.usd_per_hour > cat.instance("g6e.xlarge").price("us-east-1").usd_per_hour
    )


def test_unknown_instance_suggests_close_names():
    with pytest.raises(NotFound) as exc:
        load_catalog().instance("p5.48xlarg")
    assert "p5.48xlarge" in exc.value.details["suggestions"]


def test_a_broken_data_file_is_reported_by_field(tmp_path):
    for f in DATA_DIR.glob("*.yaml"):
        (tmp_path / f.name).write_text(f.read_text())
    doc = yaml.safe_load((tmp_path / "models.yaml").read_text())
    doc["models"][0]["layers"] = -1
    (tmp_path / "models.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(InvalidInput) as exc:
        build_catalog(tmp_path)
    assert any(p.field == "models.0.layers" for p in exc.value.problems)


# --- models from config.json ------------------------------------------------------------------------------
def test_model_from_config_matches_the_catalogs_parameter_count():
    spec = model_from_config(
        json.loads((FIXTURES / "llama-3.1-8b.config.json").read_text()), "acme/llama-like"
    )
    assert spec.params_b == pytest.approx(load_catalog().model("llama-3.1-8b").params_b, rel=0.005)
    assert spec.kv_bytes_per_token() == 131_072


def test_moe_config_gives_total_and_active_parameters():
    spec = model_from_config(json.loads((FIXTURES / "mixtral-8x7b.config.json").read_text()), "acme/moe")
    assert spec.moe is not None and spec.moe.num_experts == 8
    assert spec.params_b == pytest.approx(46.7, rel=0.01)
    assert spec.active_params_b == pytest.approx(12.88, rel=0.01)


def test_malformed_config_is_refused_with_the_missing_fields():
    with pytest.raises(InvalidInput) as exc:
        model_from_config({"hidden_size": "big", "vocab_size": 10}, "acme/x")
    fields = {p.field for p in exc.value.problems}
    assert {"num_hidden_layers", "hidden_size", "num_attention_heads"} <= fields


# --- prices from the AWS Pricing API (botocore Stubber, no network) --------------------------------------
def _price_item(usd: str) -> str:
    return json.dumps(
        {
            "terms": {
                "OnDemand": {
                    "X.JRTCKXETXF": {"priceDimensions": {"X.6YS6EN2CT7": {"pricePerUnit": {"USD": usd}}}}
                }
            }
        }
    )


def test_refresh_prices_reads_on_demand_prices_from_the_pricing_api():
    import boto3

    client = boto3.client("pricing", region_name="us-east-1")
    with Stubber(client) as stub:
        stub.add_response("get_products", {"PriceList": [_price_item("1.0060000000")]})
        stub.add_response("get_products", {"PriceList": []})
        prices = fetch_prices(["g5.xlarge", "p5e.48xlarge"], "us-east-1", client=client)
    assert prices == {"g5.xlarge": 1.006, "p5e.48xlarge": None}
    doc: dict[str, Any] = {
        "instances": [{"instance_type": "g5.xlarge", "prices": {"us-east-1": {"usd_per_hour": 1.2}}}]
    }
    assert apply_prices(doc, "us-east-1", prices) == ["g5.xlarge"]
    assert doc["instances"][0]["prices"]["us-east-1"]["source"].startswith("AWS Pricing API")


def test_refresh_prices_refuses_an_unknown_region():
    with pytest.raises(InvalidInput):
        fetch_prices(["g5.xlarge"], "mars-1", client=object())


def test_the_catalog_read_from_its_parsed_cache_is_the_catalog_read_from_yaml(tmp_path, monkeypatch):
    # given an empty cache directory
    from sizing.catalog.loading import CACHE_ENV, build_catalog

    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    # when the catalog is built twice: from the YAML (filling the cache), then from the cache
    from_yaml = build_catalog()
    cached = sorted(p.name for p in (tmp_path / "sizing-catalog").iterdir())
    from_cache = build_catalog()
    # then the cache holds one parsed file per catalog file and the validated catalog's compact copy, and both
    # catalogs are the same
    assert sum(name.endswith(".json") for name in cached) >= 4
    assert sum(name.endswith(".pickle") for name in cached) == 1
    # and the compact copy (a pickle: it runs code when loaded) is this user's only
    pickled = next((tmp_path / "sizing-catalog").glob("*.pickle"))
    assert pickled.stat().st_mode & 0o777 == 0o600
    for part in ("accelerators", "instances", "models", "managed"):
        assert getattr(from_cache, part) == getattr(from_yaml, part), part


def test_an_unwritable_cache_still_reads_the_yaml(tmp_path, monkeypatch):
    # given a cache path that cannot be created (a file stands where the directory would be)
    from sizing.catalog.loading import CACHE_ENV, build_catalog

    (tmp_path / "sizing-catalog").write_text("not a directory")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    # when the catalog is built
    catalog = build_catalog()
    # then it is read from the YAML all the same
    assert "g6e.xlarge" in catalog.instances


def _copy_of_the_data(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    for f in DATA_DIR.glob("*.yaml"):
        (data / f.name).write_bytes(f.read_bytes())
    return data


def test_a_changed_data_file_is_never_served_from_the_compact_copy(tmp_path, monkeypatch):
    # given a catalog built once from a copy of the data, so its compact copy is kept
    from sizing.catalog.loading import CACHE_ENV, build_catalog

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    data = _copy_of_the_data(tmp_path)
    before = build_catalog(data).instances["g6e.xlarge"].prices["us-east-1"].usd_per_hour
    # when a price in the YAML changes and the catalog is built again
    doc = yaml.safe_load((data / "instances.yaml").read_text())
    entry = next(i for i in doc["instances"] if i["instance_type"] == "g6e.xlarge")
    entry["prices"]["us-east-1"]["usd_per_hour"] = before * 2
    (data / "instances.yaml").write_text(yaml.safe_dump(doc))
    after = build_catalog(data).instances["g6e.xlarge"].prices["us-east-1"].usd_per_hour
    # then the new price is read, and the cache keeps one compact copy per version of the data
    assert after == pytest.approx(before * 2)
    assert len(list((tmp_path / "cache" / "sizing-catalog").glob("*.pickle"))) == 2


def test_a_compact_copy_others_could_have_written_is_never_loaded(tmp_path, monkeypatch):
    # given a cache directory anyone can write, holding a "compact copy" under the name the shipped data has --
    # planted by another user: a catalog with a model the data does not have
    import pickle

    from sizing.catalog.loading import CACHE_ENV, _compact_name, build_catalog

    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    shared = tmp_path / "sizing-catalog"
    shared.mkdir()
    shared.chmod(0o777)
    real = build_catalog()
    planted = Catalog(
        list(real.accelerators.values()),
        list(real.instances.values()),
        [*real.models.values(), real.model("llama-3.1-8b").model_copy(update={"id": "planted/model"})],
        real.managed,
    )
    target = shared / _compact_name(DATA_DIR, None)
    target.write_bytes(pickle.dumps(planted))
    target.chmod(0o666)
    # when the catalog is built
    catalog = build_catalog()
    # then the planted copy was not read: the catalog is the one the data describes
    assert "planted/model" not in catalog.models
    assert catalog.models == real.models
    # and in a private cache directory the same kind of copy is read (so the check above is what refused it)
    shared.chmod(0o700)
    target.write_bytes(pickle.dumps(planted))
    target.chmod(0o600)
    assert "planted/model" in build_catalog().models


def test_a_build_ships_the_compact_copy_so_a_cold_start_never_validates(tmp_path, monkeypatch):
    # given the compact copy packaged beside the code, as `make build` does into the Lambda layer, and a cache
    # that cannot be written (a read-only file system)
    import sizing.catalog.loading as loading

    monkeypatch.setattr(loading, "PACKAGED_COMPACT_DIR", tmp_path / "compact")
    written = loading.package_compact()
    (tmp_path / "sizing-catalog").write_text("not a directory")
    monkeypatch.setenv(loading.CACHE_ENV, str(tmp_path))

    def no_validation(*_: object) -> None:
        raise AssertionError("the catalog was validated again")

    monkeypatch.setattr(loading, "_validated", no_validation)
    # when a new process builds the catalog
    catalog = loading.build_catalog()
    # then it is the packaged copy: the same catalog, with nothing validated
    assert written.parent == tmp_path / "compact" and written.stat().st_size > 0
    # and the copy is readable by every user, as the code beside it (Lambda reads the layer as another user than
    # the one that built it)
    assert (written.stat().st_mode & 0o777, written.parent.stat().st_mode & 0o777) == (0o644, 0o755)
    assert catalog.models == load_catalog().models and catalog.instances == load_catalog().instances


def test_the_snapshot_covers_every_family_the_catalog_prices_that_its_source_lists() -> None:
    # given the catalog's instance families
    cat = load_catalog()
    families = {i.family: i for i in cat.instances.values()}
    # when each family's availability in a snapshot Region is asked
    known = {f: i.available_in("eu-west-1") for f, i in families.items()}
    # then every family is known there except those the dated source does not list (p6-b200, trn2: stated in
    # data/regions.yaml), and Neuron and P4 are now among them
    assert {f for f, v in known.items() if v is None} == {"p6-b200", "trn2"}
    assert (
        known["inf2"] is True and known["p4d"] is True and known["p4de"] is False and known["trn1"] is False
    )
