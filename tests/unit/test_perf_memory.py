"""Memory fit: weights, KV cache and the arithmetic a user sees when a model does not fit."""

from __future__ import annotations

import pytest

from sizing.base.errors import InvalidInput, NotFound
from sizing.perf.config import HardwareConfig
from sizing.perf.memory import memory_fit

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA_70B = "meta-llama/Llama-3.1-70B-Instruct"


def test_bf16_llama_8b_weights_take_about_16_gb():
    # given one A10G serving Llama-3.1-8B in bf16
    cfg = HardwareConfig.create(LLAMA_8B, "g5.xlarge", tp=1)
    # when
    fit = memory_fit(cfg)
    # then 8.03 B params x 2 bytes = 16.06 GB, and the rest of the 24 GB holds a KV cache
    assert fit.weights_gb_per_device == pytest.approx(16.06, abs=0.05)
    assert fit.fits
    assert fit.kv_cache_tokens > 8192


def test_llama_70b_kv_cache_is_327680_bytes_per_token():
    # given Llama-3.1-70B: 80 layers x 8 KV heads x 128 head dim, K and V in bf16
    cfg = HardwareConfig.create(LLAMA_70B, "p5.48xlarge", tp=4)
    # when
    fit = memory_fit(cfg)
    # then 2 x 80 x 8 x 128 x 2 bytes
    assert fit.kv_bytes_per_token == 327_680
    assert fit.kv_bytes_per_token_per_device == 327_680 / 4


def test_kv_heads_are_replicated_when_tp_exceeds_them():
    # given 70B (8 KV heads) over 16 NeuronCores: each core must hold a whole KV head
    cfg = HardwareConfig.create(LLAMA_70B, "trn1.32xlarge", tp=16, engine="neuron")
    # when
    fit = memory_fit(cfg)
    # then each device stores one head (2 x 80 x 1 x 128 x 2 bytes), twice its 1/16 share
    assert fit.kv_bytes_per_token_per_device == 2 * 80 * 1 * 128 * 2
    assert fit.kv_bytes_per_token_per_device == 2 * fit.kv_bytes_per_token / 16


def test_quantization_shrinks_weights():
    # given the same deployment in bf16, fp8 and int4
    weights = {
        q: memory_fit(HardwareConfig.create(LLAMA_8B, "g6e.xlarge", tp=1, quant=q)).weights_gb_per_device
        for q in ("bf16", "fp8", "int4")
    }
    # then fp8 halves and int4 roughly quarters the weights
    assert weights["fp8"] == pytest.approx(weights["bf16"] / 2, rel=0.02)
    assert weights["int4"] < weights["bf16"] / 3.5


def test_a_model_that_does_not_fit_says_why_in_numbers():
    # given 70B in bf16 on four 24 GB GPUs
    cfg = HardwareConfig.create(LLAMA_70B, "g5.12xlarge", tp=4)
    # when
    fit = memory_fit(cfg)
    # then the answer is "no", with the arithmetic
    assert not fit.fits
    assert "141.1 GB" in fit.reason
    assert "4 x 24.0 GB" in fit.reason
    assert fit.kv_cache_tokens == 0


def test_context_longer_than_the_kv_cache_does_not_fit():
    # given an 8B model on one 24 GB GPU asked to hold a 128k-token context
    cfg = HardwareConfig.create(LLAMA_8B, "g5.xlarge", tp=1, max_model_len=131_072)
    # when
    fit = memory_fit(cfg)
    # then the weights fit but one full context does not
    assert not fit.fits
    assert "131,072-token context" in fit.reason


def test_higher_memory_utilisation_gives_more_kv_tokens():
    low = memory_fit(HardwareConfig.create(LLAMA_8B, "g6e.xlarge", tp=1, gpu_memory_utilization=0.8))
    high = memory_fit(HardwareConfig.create(LLAMA_8B, "g6e.xlarge", tp=1, gpu_memory_utilization=0.95))
    assert high.kv_cache_tokens > low.kv_cache_tokens


def test_tp_none_picks_the_smallest_tensor_parallel_that_fits():
    # when no TP is given for 70B on 8 x H100
    cfg = HardwareConfig.create(LLAMA_70B, "p5.48xlarge")
    # then the chosen TP fits and half of it does not
    assert memory_fit(cfg).fits
    half = HardwareConfig.create(LLAMA_70B, "p5.48xlarge", tp=cfg.tensor_parallel // 2)
    assert not memory_fit(half).fits


def test_tp_that_does_not_divide_the_heads_is_refused_naming_both_numbers():
    with pytest.raises(InvalidInput) as err:
        HardwareConfig.create(LLAMA_70B, "p5.48xlarge", tp=3)
    assert "3" in str(err.value) and "64 attention heads" in str(err.value)


def test_tp_beyond_the_instance_is_refused_naming_both_numbers():
    with pytest.raises(InvalidInput) as err:
        HardwareConfig.create(LLAMA_70B, "g5.12xlarge", tp=8)
    assert "8" in str(err.value) and "4 devices" in str(err.value)


def test_unknown_instance_and_model_come_with_suggestions():
    with pytest.raises(NotFound) as err:
        HardwareConfig.create(LLAMA_8B, "g5.12xlarg")
    assert "g5.12xlarge" in err.value.details["suggestions"]
    with pytest.raises(NotFound) as err2:
        HardwareConfig.create("meta-llama/Llama-3.1-8", "g5.xlarge")
    assert err2.value.details["suggestions"]


def test_engines_run_only_on_their_hardware():
    with pytest.raises(InvalidInput):
        HardwareConfig.create(LLAMA_8B, "g5.xlarge", engine="neuron")
    with pytest.raises(InvalidInput):
        HardwareConfig.create(LLAMA_8B, "inf2.48xlarge", tp=8, engine="vllm")


def test_fp8_is_refused_on_gpus_without_fp8_math():
    with pytest.raises(InvalidInput) as err:
        HardwareConfig.create(LLAMA_8B, "g5.xlarge", quant="fp8")
    assert "fp8" in str(err.value)


def test_a_copied_model_with_other_layers_has_its_own_weight_bytes():
    # given a model whose parameter and weight bytes were already worked out once (they are memoised per spec)
    from sizing.catalog import load_catalog

    spec = load_catalog().model(LLAMA_8B)
    before = spec.part_bytes("bf16")["attention"]
    # when a copy changes its architecture
    half = spec.model_copy(update={"layers": spec.layers // 2})
    # then the copy's bytes follow its own layers, the original's stay, and equality still reads only the fields
    assert half.part_bytes("bf16")["attention"] == pytest.approx(before / 2)
    assert spec.part_bytes("bf16")["attention"] == before
    assert spec == spec.model_copy()
    # and a caller changing the returned dict does not change what the next caller reads
    spec.param_parts()["attention"] = 0.0
    assert spec.part_bytes("bf16")["attention"] == before


def test_a_configuration_reads_the_catalog_it_is_given_not_the_first_one_it_saw():
    # given a configuration already fitted against the shipped catalog
    from sizing.catalog.loading import build_catalog

    cfg = HardwareConfig.create(LLAMA_8B, "g5.xlarge", tp=1)
    shipped = memory_fit(cfg)
    # when a catalog whose A10G has half the memory is passed
    other = build_catalog()
    a10g = other.accelerators["a10g"]
    other.accelerators["a10g"] = a10g.model_copy(update={"memory_gb": 12.0, "usable_memory_mib": None})
    # then the fit reads that catalog (the per-catalog memo of the entries is not shared across catalogs)
    assert not memory_fit(cfg, catalog=other).fits
    assert memory_fit(cfg).fits == shipped.fits
