"""Build a catalog `ModelSpec` from a Hugging Face `config.json`.

Parameter counts are computed from the architecture (embeddings, attention, MLP or experts, norms ignored), the
same basis as the shipped catalog ("computed from config, excl. norms/biases"). Used by `sizing catalog add-model`
and by the model-release handler."""

from __future__ import annotations

from datetime import date
from typing import Any

from pydantic import ValidationError

from sizing.base.errors import InvalidInput, Problem, problems_from_pydantic
from sizing.catalog.records import ModelSpec

#: config.json keys that name the same thing in different model families.
_ALIASES = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "hidden": ("hidden_size", "n_embd", "d_model"),
    "heads": ("num_attention_heads", "n_head"),
    "kv_heads": ("num_key_value_heads", "num_kv_heads", "n_head_kv"),
    "inter": ("intermediate_size", "ffn_dim", "n_inner"),
    "experts": ("num_local_experts", "num_experts", "n_routed_experts"),
    "topk": ("num_experts_per_tok", "num_experts_per_token", "moe_topk"),
    "expert_inter": ("moe_intermediate_size", "expert_intermediate_size"),
    "shared_inter": ("shared_expert_intermediate_size",),
    "max_pos": ("max_position_embeddings", "n_positions", "max_sequence_length"),
}


def _get(cfg: dict[str, Any], key: str) -> Any:
    for name in _ALIASES[key]:
        if cfg.get(name) is not None:
            return cfg[name]
    return None


def _int(cfg: dict[str, Any], key: str, problems: list[Problem], required: bool = True) -> int | None:
    v = _get(cfg, key)
    if v is None:
        if required:
            problems.append(Problem(_ALIASES[key][0], "missing from config.json"))
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        problems.append(Problem(_ALIASES[key][0], f"must be a positive integer, got {v!r}"))
        return None
    return v


def model_from_config(config: Any, model_id: str, source: str | None = None) -> ModelSpec:
    """Parse a config.json mapping (text configs; for multimodal ones, `text_config` is used)."""
    if not isinstance(config, dict):
        raise InvalidInput("config.json must be a JSON object", [Problem("config", "not an object")])
    if "/" not in model_id or len(model_id) > 200:
        raise InvalidInput(
            "model id must look like org/name", [Problem("id", f"'{model_id}' is not org/name")]
        )
    cfg = dict(config.get("text_config") or config)
    problems: list[Problem] = []
    layers = _int(cfg, "layers", problems)
    hidden = _int(cfg, "hidden", problems)
    heads = _int(cfg, "heads", problems)
    inter = _int(cfg, "inter", problems)
    vocab = cfg.get("vocab_size")
    if not isinstance(vocab, int) or vocab <= 0:
        problems.append(Problem("vocab_size", "missing or not a positive integer"))
    max_pos = _int(cfg, "max_pos", problems)
    kv_heads = _int(cfg, "kv_heads", problems, required=False) or heads
    if problems:
        raise InvalidInput(f"config.json for {model_id} cannot be read as a decoder LLM", problems)
    assert layers and hidden and heads and inter and max_pos and kv_heads and isinstance(vocab, int)
    head_dim = cfg.get("head_dim") or hidden // heads
    experts = _int(cfg, "experts", problems, required=False)
    topk = _int(cfg, "topk", problems, required=False)
    expert_inter = _int(cfg, "expert_inter", problems, required=False) or inter
    shared_inter = _int(cfg, "shared_inter", problems, required=False) or 0
    if problems:
        raise InvalidInput(f"config.json for {model_id} has invalid MoE fields", problems)
    tied = bool(cfg.get("tie_word_embeddings", False))

    attn = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2  # q, o + k, v
    embed = vocab * hidden * (1 if tied else 2)
    moe = None
    if experts and experts > 1 and topk:
        per_expert = 3 * hidden * expert_inter  # gated MLP: gate, up, down
        shared = 3 * hidden * shared_inter
        router = hidden * experts
        total = embed + layers * (attn + experts * per_expert + shared + router)
        active = embed + layers * (attn + topk * per_expert + shared + router)
        moe = {"num_experts": experts, "experts_per_token": topk, "expert_intermediate_size": expert_inter}
    else:
        total = active = embed + layers * (attn + 3 * hidden * inter)
    try:
        return ModelSpec.model_validate(
            {
                "id": model_id,
                "aliases": [],
                "params_b": round(total / 1e9, 2),
                "active_params_b": round(active / 1e9, 2),
                "layers": layers,
                "hidden_size": hidden,
                "num_attention_heads": heads,
                "num_key_value_heads": kv_heads,
                "head_dim": head_dim,
                "intermediate_size": inter,
                "vocab_size": vocab,
                "max_position_embeddings": max_pos,
                "tie_word_embeddings": tied,
                "moe": moe,
                "source": source or f"config.json of {model_id} (parameters computed from config)",
                "as_of": date.today(),
            }
        )
    except ValidationError as exc:
        raise InvalidInput(
            f"config.json for {model_id} is inconsistent", problems_from_pydantic(exc)
        ) from None
