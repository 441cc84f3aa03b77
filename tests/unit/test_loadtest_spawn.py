"""How the load test starts a closed loop's users (`sizing.base.spawn`), and the estimator re-reading one of its
closed-loop levels with its users started the same way (`sizing.perf.fit.simulate_row`)."""

from __future__ import annotations

import pytest

from sizing.base.spawn import ramp_s, spawn_rate
from sizing.perf.calrows import CalRow
from sizing.perf.fit import predict_row
from sizing.perf.step import Profile

PROFILE = Profile(0.5, 0.6, 0.003)


def test_users_start_over_half_the_warm_up_and_at_least_one_a_second():
    # GIVEN levels of 64 users after 8 s of warm-up, 4 users after 20 s, 4 users with no warm-up
    # THEN the 64 start over 4 s (half the warm-up), the 4 one a second (not spread over 10 s), and without a
    # warm-up all within a tenth of a second
    assert (spawn_rate(64, 8.0), ramp_s(64, 8.0)) == (16.0, 4.0)
    assert (spawn_rate(4, 20.0), ramp_s(4, 20.0)) == (1.0, 4.0)
    assert ramp_s(4, 0.0) == pytest.approx(0.1)


def _closed_level(warmup_s: float | None) -> CalRow:
    """Four users of long prompts and short answers on one L4, as this product's load test records a level."""
    return CalRow.model_validate(
        {
            "row_id": "LT-closed", "source": "test", "study": "test", "engine": "vllm", "accelerator": "l4",
            "tp": 1, "model": "meta-llama/Llama-3.1-8B-Instruct", "quantization": "bf16", "input_tokens": 4000,
            "output_tokens": 100, "load": "concurrency", "load_value": 4, "ttft_ms": 100.0, "tpot_ms": 30.0,
            "output_tokens_per_s": 10.0, "origin": "loadtest",
            **({"warmup_s": warmup_s} if warmup_s is not None else {}),
        }
    )  # fmt: skip


def test_a_closed_loop_of_the_load_test_is_simulated_with_its_users_started_as_the_load_test_started_them():
    # WHEN the same level is predicted without its warm-up (users spread over one request), and with the warm-up it
    # ran: 1 s (its users start within half a second) and 30 s (one a second)
    spread, quick, slow = (predict_row(_closed_level(w), PROFILE)["ttft"] for w in (None, 1.0, 30.0))
    # THEN users started close together find each other's prompts in the queue, for rounds: the first token waits
    # longer the closer they started (evenly spread users never overlap their prefills)
    assert quick > 1.3 * spread
    assert spread < slow < quick


def test_a_level_in_lock_step_or_without_its_warm_up_keeps_the_simulators_own_start():
    from sizing.base.spawn import simulated_ramp_s

    # GIVEN four users after a 20-s warm-up, the same in lock-step groups of three, and a level that states none
    # THEN only the first is started over the load test's ramp; groups are simulated as groups, and a level
    # stored before levels kept their warm-up is simulated as it was
    assert simulated_ramp_s(4, 20.0) == 4.0
    assert simulated_ramp_s(4, 20.0, lockstep_group=3) is None
    assert simulated_ramp_s(4, None) is None


def test_the_learning_loop_re_simulates_a_stored_level_with_its_users_started_as_the_load_test_did():
    from sizing.base.distributions import TokenDistribution
    from sizing.learn.levels import simulate_closed
    from sizing.perf.config import HardwareConfig
    from sizing.perf.step import StepModel

    # GIVEN the long-prompt level on one L4, stored with a 1-s warm-up and as a level of an earlier release
    step = StepModel.for_config(
        HardwareConfig.create("meta-llama/Llama-3.1-8B-Instruct", "g6.xlarge", tp=1), PROFILE
    )
    prompt, answer = TokenDistribution.fixed(4000), TokenDistribution.fixed(100)
    # WHEN the refit re-simulates each
    quick = simulate_closed(step, 4, 1, prompt, answer, warmup_s=1.0).ttft_ms.mean
    spread = simulate_closed(step, 4, 1, prompt, answer).ttft_ms.mean
    # THEN the users started together wait for each other's prompts, as the engine's did
    assert quick > 1.2 * spread
