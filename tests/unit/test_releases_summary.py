"""The best architectures in a release note: a run's figures are labelled by what produced them."""

from __future__ import annotations

from sizing.releases.notify import summary


def _arch(measured: dict | None) -> dict:
    """An architecture stating what every architecture must (its model and engine among it)."""
    return {
        "id": "eks:g6e.xlarge:tp1:fp8:vllm:on-demand",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "engine": "vllm",
        "deployment": "eks",
        "instance_type": "g6e.xlarge",
        "cost": {"usd_per_month": 2000.0},
        "meets_slo": True,
        "predicted": {"ttft_ms": {"p95": 300.0}, "e2e_s": {"p95": 1.2}},
        "measured": measured,
    }


def test_a_twins_figures_are_simulated_an_endpoints_measured_and_an_estimate_has_neither():
    # given three results: an estimate, a run on a local twin, a run on a real endpoint
    twin = summary({"architectures": [_arch({"ttft_ms": {"p95": 410.0}, "origin": "twin"})]}, 1)[0]
    real = summary({"architectures": [_arch({"ttft_ms": {"p95": 420.0}, "origin": "endpoint"})]}, 1)[0]
    plain = summary({"architectures": [_arch(None)]}, 1)[0]
    # then the twin's figures are under a simulated (twin) name, never a measured one
    assert twin.simulated_twin_p95 == {"ttft_ms": 410.0} and twin.measured_p95 is None
    # and the endpoint's are measured
    assert real.measured_p95 == {"ttft_ms": 420.0} and real.simulated_twin_p95 is None
    # and an estimate carries its prediction only
    assert plain.predicted_p95 == {"ttft_ms": 300.0, "e2e_s": 1.2}
    assert plain.measured_p95 is None and plain.simulated_twin_p95 is None
