"""How a managed endpoint's time to first token grows with the prompt (Amazon Bedrock on-demand).

A Bedrock latency profile states one TTFT per model (`catalog.models.BedrockLatency`), read from short chat
prompts. A server prefills a prompt before it streams the first token, so a 30,000-token prompt cannot come back
as fast as a short chat: AWS's own guidance is that invocation latency "scales with the combined count of input
and output tokens" (Amazon Bedrock, re:Post answer on TimeToFirstToken). AWS publishes neither the hardware nor the
prefill rate of an on-demand model, so the prompt's extra prefill is the estimator's own roofline of the model on
an assumed deployment (`assumed_prefill`): H100s at the calibrated Hopper compute efficiency, the fewest GPUs
(a power of two, at most one 8-GPU node) whose memory holds the bf16 weights with half of it left for the KV
cache. The stated figure stands for a prompt of `REFERENCE_PROMPT_TOKENS`; a longer prompt adds its prefill
beyond that, a shorter one takes nothing off (the stated figure is mostly fixed cost: network, API, queueing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sizing.perf.calibration import profile_for
from sizing.perf.step import unread_embedding_params

if TYPE_CHECKING:
    from sizing.catalog import Catalog, ModelSpec

#: Prompt length a Bedrock latency profile's stated TTFT stands for (assumed: the community figures behind the
#: profiles time short chat prompts, of a few hundred tokens; docs/serving-facts.md s6).
REFERENCE_PROMPT_TOKENS = 500
#: The accelerator and engine whose calibrated compute efficiency prices the extra prefill (assumed: AWS does not
#: publish what serves Bedrock; H100 is its most common large-model GPU instance, p5).
ASSUMED_ACCELERATOR = "h100"
ASSUMED_ENGINE = "vllm"
#: Share of the GPUs' memory the weights may take in the assumed deployment (the rest holds the KV cache).
WEIGHT_SHARE = 0.5
#: At most one 8-GPU node serves a replica (p5.48xlarge).
MAX_GPUS = 8


@dataclass(frozen=True)
class PromptPrefill:
    """The prefill time of a prompt on the assumed deployment: seconds per token (linear layers) and per (query,
    key) pair (attention)."""

    per_token_s: float
    per_pair_s: float
    gpus: int
    basis: str

    def seconds(self, prompt_tokens: float) -> float:
        p = max(0.0, float(prompt_tokens))
        return self.per_token_s * p + self.per_pair_s * p * p / 2

    def extra_ms(self, prompt_tokens: float) -> float:
        """Milliseconds a prompt of `prompt_tokens` adds to the stated TTFT: its prefill beyond the reference
        prompt's; never negative, and never smaller for a longer prompt."""
        return max(0.0, self.seconds(prompt_tokens) - self.seconds(REFERENCE_PROMPT_TOKENS)) * 1000

    def tokens_per_s(self, prompt_tokens: float) -> float:
        s = self.seconds(prompt_tokens)
        return prompt_tokens / s if s > 0 else math.inf


def assumed_prefill(spec: ModelSpec, catalog: Catalog) -> PromptPrefill:
    """The prefill roofline of `spec` on the assumed deployment (module docstring)."""
    acc = catalog.accelerators[ASSUMED_ACCELERATOR]
    eff = profile_for(ASSUMED_ACCELERATOR, ASSUMED_ENGINE).compute_eff
    weights = spec.params_b * 1e9 * 2
    need = weights / (acc.device_memory_bytes * WEIGHT_SHARE)
    gpus = min(MAX_GPUS, 2 ** max(0, math.ceil(math.log2(max(need, 1.0)))))
    flops = acc.device_flops("bf16") * eff * gpus
    params = spec.active_params_b * 1e9 - unread_embedding_params(spec)
    per_pair = 4 * spec.layers * spec.num_attention_heads * spec.head_dim  # QK^T and AV per (query, key) pair
    basis = (
        f"assumed deployment: {gpus} x {acc.id} at the calibrated compute efficiency {eff:.2f} (AWS publishes"
        f" neither Bedrock's hardware nor its prefill rate); the stated TTFT stands for a"
        f" {REFERENCE_PROMPT_TOKENS}-token prompt"
    )
    return PromptPrefill(2 * params / flops, per_pair / flops, gpus, basis)


def bedrock_ttft_ms(stated_ms: float, prompt_tokens: float, prefill: PromptPrefill | None) -> float:
    """A Bedrock TTFT for a prompt of `prompt_tokens`: the profile's stated (short-chat) figure plus the prompt's
    prefill beyond the reference prompt; the stated figure alone when the model's architecture is unknown."""
    return stated_ms + (prefill.extra_ms(prompt_tokens) if prefill is not None else 0.0)


__all__ = ["REFERENCE_PROMPT_TOKENS", "PromptPrefill", "assumed_prefill", "bedrock_ttft_ms"]
