"""Load testing LLM endpoints the way users experience them: Locust users streaming from OpenAI-compatible
endpoints, Bedrock ConverseStream or SageMaker response streams; TTFT at the first content token, inter-token
latencies, TPOT, e2e and tokens per request; concurrency steps, Poisson-rate steps or the workload's own user
model; exact per-step percentiles; SLA search.

Locust runs in its own process (`sizing.loadtest.process`); this package's top level never imports it, so
callers use `run_sweep` / `run_config` from any process.
"""

from __future__ import annotations

from sizing.loadtest.config import LoadTestConfig, SlaSearchSpec, SloTarget
from sizing.loadtest.launch import read_steps, run_config, run_sweep
from sizing.loadtest.metrics import Distribution, RequestRecord, StepResult

__all__ = [
    "Distribution",
    "LoadTestConfig",
    "RequestRecord",
    "SlaSearchSpec",
    "SloTarget",
    "StepResult",
    "read_steps",
    "run_config",
    "run_sweep",
]
