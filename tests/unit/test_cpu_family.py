"""CPUs as a hardware family: the catalog's CPU instances (data/cpus.yaml), their memory and cost arithmetic, vLLM's
CPU defaults, and small models ranked on CPUs beside GPUs."""

from __future__ import annotations

import pytest

from sizing.base.errors import InvalidInput
from sizing.catalog import load_catalog
from sizing.deploy.manifests import render
from sizing.deploy.validate import validate
from sizing.perf.calibration import family_of, kind_of
from sizing.perf.config import HardwareConfig
from sizing.perf.engines import VLLM_CPU_IMAGE, engine_defaults
from sizing.perf.memory import memory_fit
from sizing.plan import estimate
from sizing.plan.cost import HOURS_PER_MONTH
from sizing.workload.parse import parse_spec

LLAMA_1B = "meta-llama/Llama-3.2-1B"


def test_a_c7i_large_is_one_sapphire_rapids_core_reading_what_one_core_can():
    # given the catalog
    cat = load_catalog()
    # when the 2-vCPU, the 48-vCPU and the 96-vCPU (one socket) sizes are read
    small, half, socket = (cat.instance(f"c7i.{s}") for s in ("large", "12xlarge", "24xlarge"))
    acc_small, acc_half, acc_socket = (cat.accelerator_of(i) for i in (small, half, socket))
    # then 2 vCPUs are one physical core: 1,024 BF16 FLOP/cycle x 3.2 GHz = 3.28 TFLOPS, and the memory bandwidth
    # one core reads (17 GB/s measured on this processor), well above its 2/96 share of the socket's 8 x DDR5-4800
    # (6.4 GB/s); 24 cores read at most the socket's 307.2 GB/s, and the whole socket has 48 cores and all of it
    assert (small.vcpu, small.memory_gib) == (2, 4)
    assert acc_small.kind == "cpu" and acc_small.vendor == "intel"
    assert acc_small.bf16_tflops == pytest.approx(1024 * 3.2e9 / 1e12, rel=1e-3)
    assert acc_small.memory_bw_gbs == pytest.approx(17.0)
    assert acc_half.memory_bw_gbs == pytest.approx(307.2)
    assert acc_socket.bf16_tflops == pytest.approx(48 * 1024 * 3.2e9 / 1e12, rel=1e-3)
    assert acc_socket.memory_bw_gbs == pytest.approx(307.2)
    # and only the one-core slice serves its requests on the core that computes the model
    assert acc_small.frontend_shares_cores and not acc_half.frontend_shares_cores
    assert not cat.accelerator_of(cat.instance("c7i.xlarge")).frontend_shares_cores
    # and the node keeps 1 GiB for itself
    assert acc_small.device_memory_bytes == 3 * 2**30


def test_cpu_families_differ_in_memory_per_vcpu_and_price():
    # given the three Sapphire Rapids families at one size
    cat = load_catalog()
    sizes = {f: cat.instance(f"{f}.4xlarge") for f in ("c7i", "m7i", "r7i")}
    # then memory is 2, 4 and 8 GiB per vCPU, and price follows it (us-east-1 list prices)
    assert [sizes[f].memory_gib for f in ("c7i", "m7i", "r7i")] == [32, 64, 128]
    assert sizes["c7i"].price("us-east-1").usd_per_hour == pytest.approx(0.714)
    assert sizes["m7i"].price("us-east-1").usd_per_hour == pytest.approx(0.8064)
    assert sizes["r7i"].price("us-east-1").usd_per_hour == pytest.approx(1.0584)


def test_a_cpu_instance_is_priced_per_region_from_the_snapshot():
    # given c7i.2xlarge, whose family the regional snapshot samples at c7i.large
    inst = load_catalog().instance("c7i.2xlarge")
    # when priced in eu-west-1
    price = inst.price("eu-west-1")
    # then it is the us-east-1 price x (c7i.large in eu-west-1 / in us-east-1), and the Region is known to sell it
    assert price.usd_per_hour == pytest.approx(0.357 * 0.09576 / 0.08925, rel=1e-4)
    assert inst.available_in("eu-west-1") is True


def test_every_size_of_a_family_shares_one_calibration_family():
    # given accelerators of several CPU sizes and families
    cat = load_catalog()
    ids = [cat.instance(t).accelerator for t in ("c7i.large", "m7i.8xlarge", "r7i.24xlarge")]
    # then they calibrate as one processor, of the cpu kind
    assert {family_of(i) for i in ids} == {"xeon-spr"}
    assert kind_of("xeon-spr") == "cpu"


def test_vllm_on_a_cpu_runs_the_cpu_builds_defaults():
    # given vLLM's defaults on a CPU instance and on a GPU of similar memory
    cpu = engine_defaults("vllm", "Intel Xeon", 32.0, kind="cpu")
    gpu = engine_defaults("vllm", "NVIDIA L40S", 48.0, kind="gpu")
    # then the CPU build schedules 128 sequences and 2,048 tokens a step, in 128-token blocks
    assert (cpu.max_num_seqs, cpu.max_num_batched_tokens, cpu.block_size) == (128, 2048, 128)
    assert (gpu.max_num_seqs, gpu.block_size) != (128, 128)


def test_the_kv_cache_of_a_cpu_replica_is_what_memory_leaves_after_weights():
    # given Llama-3.2-1B in bf16 on c7i.xlarge (8 GiB, 1 GiB kept by the node)
    cfg = HardwareConfig.create(LLAMA_1B, "c7i.xlarge", tp=1)
    # when
    fit = memory_fit(cfg)
    # then 0.92 of 7 GiB less 1.5 GB of runtime, the activations and 2.47 GB of weights holds the KV cache,
    # in whole 128-token blocks of 16 layers x 8 KV heads x 64 x 2 (K, V) x 2 bytes
    kv_bytes = 0.92 * 7 * 2**30 - 1.5e9 - fit.activation_gb_per_device * 1e9 - fit.weights_gb_per_device * 1e9
    per_token = 2 * 16 * 8 * 64 * 2
    assert fit.kv_bytes_per_token == per_token
    assert fit.kv_cache_tokens == int(kv_bytes // per_token) // 128 * 128
    assert fit.fits


def test_a_model_too_large_for_a_small_cpu_instance_does_not_fit():
    # given Llama-3.2-1B on c7i.large: 3 GiB for the engine, 1.5 GB of it the runtime
    fit = memory_fit(HardwareConfig.create(LLAMA_1B, "c7i.large", tp=1))
    # then its 2.47 GB of weights leave no KV cache
    assert not fit.fits
    assert "KV cache" in fit.reason or "weights" in fit.reason


def test_a_gpu_engine_on_a_cpu_instance_is_refused_by_name():
    # when TensorRT-LLM is asked for on a CPU instance
    with pytest.raises(InvalidInput) as err:
        HardwareConfig.create(LLAMA_1B, "c7i.4xlarge", tp=1, engine="trtllm")
    # then the error names the engine that does run there
    assert "use vllm" in err.value.message


def _small_model_spec(families: list[str]) -> dict:
    return {
        "name": "internal-tagger",
        "model": LLAMA_1B,
        "users": {"total": 200, "peak_active_fraction": 0.1, "requests_per_active_hour": 20},
        "tokens": {"input": {"mean": 300, "p95": 600}, "output": {"mean": 40, "p95": 80}},
        "slo": {"ttft_ms": {"p95": 2000}, "e2e_s": {"p95": 10}},
        "constraints": {
            "region": "us-east-1",
            "deployments": ["eks"],
            "capacity": ["on-demand"],
            "quantizations": ["bf16"],
            "instance_families": families,
        },
    }


def test_a_small_model_at_low_traffic_is_sized_on_a_cpu_instance_at_its_list_price():
    # given a 1B model at 0.1 requests/s, allowed only on c7i
    result = estimate(parse_spec(_small_model_spec(["c7i"]))).document()
    # then the best answer is a c7i instance running vLLM's CPU image, and its compute cost is the node-hours of an
    # average day (weekends hold the minimum) x the hourly list price x days in a month
    best = result["architectures"][0]
    assert best["instance_type"].startswith("c7i.")
    assert best["serving"]["image"] == VLLM_CPU_IMAGE
    hourly = load_catalog().instance(best["instance_type"]).price("us-east-1").usd_per_hour
    breakdown = best["cost"]["breakdown"]
    assert breakdown["instance_usd_per_hour"] == pytest.approx(hourly)
    assert best["instances"]["min"] * 24 <= breakdown["node_hours_per_day"] <= best["instances"]["peak"] * 24
    assert breakdown["compute_usd_per_month"] == pytest.approx(
        breakdown["node_hours_per_day"] * hourly * HOURS_PER_MONTH / 24, rel=0.01
    )


def test_cpu_and_gpu_instances_are_ranked_by_cost_side_by_side():
    # given the same workload allowed on CPUs and GPUs
    result = estimate(parse_spec(_small_model_spec(["c7i", "m7i", "g4dn", "g6"]))).document()
    archs = result["architectures"]
    kinds = {load_catalog().accelerator_of(load_catalog().instance(a["instance_type"])).kind for a in archs}
    # then both kinds are ranked, cheapest first
    assert kinds == {"cpu", "gpu"}
    costs = [a["cost"]["usd_per_month"] for a in archs]
    assert costs == sorted(costs)


def test_a_cpu_architecture_renders_nodes_without_accelerators_that_only_its_pods_tolerate():
    # given the best c7i answer for the small model
    arch = estimate(parse_spec(_small_model_spec(["c7i"]))).document()["architectures"][0]
    # when its manifests are rendered
    objs = {o["kind"]: o for o in render(arch, "0123456789abcdef")}
    pool, deployment = objs["NodePool"], objs["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    # then nothing asks for a GPU or NeuronCore: the pod asks for cores and memory on the CPU image, and the
    # NodePool's taint is the CPU one that only the serving pod tolerates
    resources = container["resources"]
    assert not any("nvidia" in k or "neuron" in k for k in {**resources["requests"], **resources["limits"]})
    assert not any("nvidia" in k or "neuron" in k for k in pool["spec"]["limits"])
    assert container["image"] == VLLM_CPU_IMAGE
    taint = pool["spec"]["template"]["spec"]["taints"][0]
    assert taint["key"].endswith("/cpu-inference")
    assert [t["key"] for t in pod["tolerations"]] == [taint["key"]]
    validate(list(objs.values()))  # raises on a schema or cross-object problem


def test_an_epyc_milan_slice_has_no_bf16_arithmetic_and_states_its_fp32_peak():
    # given the catalog's 2-vCPU AMD and Intel slices
    cat = load_catalog()
    amd, intel = (cat.accelerator_of(cat.instance(t)) for t in ("c6a.large", "c7i.large"))
    # then the Zen 3 core's two 256-bit FMA pipes give 32 fp32 FLOP a cycle at 3.6 GHz, and it has no bf16
    # arithmetic; the Sapphire Rapids core has AMX for bf16 and two AVX-512 FMA units (64) for fp32
    assert amd.fp32_tflops == pytest.approx(32 * 3.6e9 / 1e12, abs=1e-3)
    assert not amd.bf16_arithmetic and intel.bf16_arithmetic
    assert intel.fp32_tflops == pytest.approx(64 * 3.2e9 / 1e12, abs=1e-3)
    # and a bf16 checkpoint is served in fp32 on the AMD slice only
    assert (amd.served_format("bf16"), intel.served_format("bf16")) == ("fp32", "bf16")
    assert amd.served_format("int8") == "int8"


def test_a_model_served_in_fp32_holds_four_bytes_a_weight_and_a_kv_element():
    # given Llama-3.2-1B on c6a.2xlarge (16 GiB) in bf16 and in fp32
    bf16, fp32 = (
        memory_fit(HardwareConfig.create(LLAMA_1B, "c6a.2xlarge", tp=1, quant=q)) for q in ("bf16", "fp32")
    )
    # then fp32 doubles the weights and the KV bytes a token, and leaves fewer tokens of KV cache
    assert fp32.weights_gb_per_device == pytest.approx(2 * bf16.weights_gb_per_device)
    assert fp32.kv_bytes_per_token == 2 * bf16.kv_bytes_per_token == 2 * 16 * 8 * 64 * 4
    assert 0 < fp32.kv_cache_tokens < bf16.kv_cache_tokens


def test_fp32_is_refused_on_a_gpu_by_name():
    # when fp32 is asked for on an L40S
    with pytest.raises(InvalidInput) as err:
        HardwareConfig.create(LLAMA_1B, "g6e.xlarge", tp=1, quant="fp32")
    # then the error names the format and the accelerator
    assert "fp32" in err.value.message and "L40S" in err.value.message


def test_a_bf16_workload_on_epyc_is_sized_and_deployed_in_fp32():
    # given the small model in bf16, allowed only on c6a
    result = estimate(parse_spec(_small_model_spec(["c6a"]))).document()
    archs = result["architectures"]
    # then every c6a answer serves it in fp32 (the processor has no bf16 arithmetic), none in bf16
    assert archs and {a["quantization"] for a in archs} == {"fp32"}
    # and its manifest tells vLLM so
    objs = {o["kind"]: o for o in render(archs[0], "0123456789abcdef")}
    args = objs["Deployment"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--dtype=float32" in args and "--dtype=bfloat16" not in args


def test_a_bf16_prediction_on_epyc_is_made_as_served_in_fp32_and_says_so():
    from sizing.perf.predict import predict

    # when a bf16 prediction is asked of a c6a and of a c7i
    amd = predict(LLAMA_1B, "c6a.2xlarge", 1, "bf16", "vllm", 300, 40, concurrency=1)
    intel = predict(LLAMA_1B, "c7i.2xlarge", 1, "bf16", "vllm", 300, 40, concurrency=1)
    # then the c6a is predicted as it would serve (fp32, as the planner sizes it) and a note says why; the c7i in bf16
    assert amd["quantization"] == "fp32" and any("served in fp32" in n for n in amd["notes"])
    assert intel["quantization"] == "bf16" and not any("served in" in n for n in intel["notes"])
