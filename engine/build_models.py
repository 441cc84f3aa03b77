"""Build the engine tier's models: small Llama- and Qwen-shaped decoders with random weights and a byte-level BPE
tokenizer, made here from a fixed seed, with nothing downloaded.

Run with the engine's own Python (`make engine` does): `python engine/build_models.py --out .engine/models
[--shapes tiny-llama,...]`. Each model lands in OUT/NAME as a Hugging Face directory vLLM serves
(`config.json`, `model.safetensors` in bf16, `tokenizer.json` with Llama-3's special tokens and chat template).
A directory already built from the same recipe (its `sizing-recipe.json` matches) is kept.

Output is gibberish; the timing and batching the server shows are real. The tokenizer is trained on English
text this machine has (the docstrings of a fixed list of Python 3.11 standard-library modules) and on the words
the load generator builds prompts from (`sizing.base.tokens.VOCABULARY`), so those are one token each, as they are in
real BPE vocabularies.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Most tokens the tokenizer learns (fewer when the corpus has fewer merges to give): small enough that the
#: embedding stays a small share of the tiny models.
VOCAB_SIZE = 16384
#: Seed of every random initialisation (weights) and of the tokenizer's corpus order.
SEED = 0
#: Context the models declare (the server's --max-model-len may be smaller).
MAX_POSITIONS = 8192
#: Llama-3's special tokens and chat template, so a chat request is templated as the product counts it
#: (`sizing.base.tokens`: <|begin_of_text|>, a header per message, <|eot_id|>).
SPECIAL_TOKENS = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] + '<|eot_id|>' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)


@dataclass(frozen=True)
class Shape:
    """A decoder's proportions. `family` picks the architecture: `llama` (no attention bias, untied embeddings)
    or `qwen2` (bias on q/k/v, tied embeddings, as Qwen2.5's small models)."""

    name: str
    family: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int


#: The grid's shapes, about 20 M to 400 M parameters. `tiny-llama` is the engine tier's default (42 M).
SHAPES: dict[str, Shape] = {
    s.name: s
    for s in (
        Shape("tiny-qwen", "qwen2", hidden=384, layers=8, heads=6, kv_heads=2, intermediate=1536),
        Shape("tiny-llama", "llama", hidden=512, layers=8, heads=8, kv_heads=4, intermediate=1536),
        Shape("small-qwen", "qwen2", hidden=896, layers=16, heads=14, kv_heads=2, intermediate=4864),
        Shape("small-llama", "llama", hidden=1024, layers=24, heads=16, kv_heads=8, intermediate=2816),
    )
}
DEFAULT_SHAPES = ("tiny-llama",)


#: Times the load generator's words are repeated in the corpus, so each (with its leading space) is one token.
VOCABULARY_REPEATS = 200


def _load_generator_words() -> tuple[str, ...]:
    """The words the load generator builds prompts from (`sizing.base.tokens.VOCABULARY`; that module imports only
    the standard library), so a prompt of N tokens by the product's count is N tokens for this tokenizer."""
    sys.path.insert(0, str(ROOT / "layers" / "sizing"))
    try:
        from sizing.base.tokens import VOCABULARY
    finally:
        sys.path.pop(0)
    return tuple(VOCABULARY)


#: Standard-library modules whose docstrings are the tokenizer's English text: fixed for the engine's pinned
#: Python (3.11), so the tokenizer (and the models built with it) change only when this file does.
CORPUS_MODULES = (
    "argparse", "collections", "csv", "datetime", "email.message", "functools", "http.client", "json",
    "logging", "pathlib", "subprocess", "threading", "typing", "unittest", "urllib.request", "xml.dom.minidom",
)  # fmt: skip


def _docstrings() -> list[str]:
    """The docstrings of the corpus modules and their public members, as ASCII lines."""
    import importlib
    import inspect

    lines: list[str] = []
    for name in CORPUS_MODULES:
        module = importlib.import_module(name)
        objects = [module] + [getattr(module, n) for n in sorted(dir(module)) if not n.startswith("_")]
        for obj in objects:
            doc = inspect.getdoc(obj) if callable(obj) or obj is module else None
            if doc:
                lines.extend(ln.encode("ascii", "ignore").decode() for ln in doc.splitlines())
    return [ln for ln in lines if ln.strip()]


def _corpus() -> list[str]:
    """English text (standard-library docstrings) and the load generator's words and chat template pieces."""
    words = " ".join(_load_generator_words())
    # the chat template's pieces between special tokens: the role names and the blank line after each header
    template = "system\n\nuser\n\nassistant\n\n"
    return _docstrings() + [words, template] * VOCABULARY_REPEATS


def build_tokenizer(out: Path) -> int:
    """The tokenizer under `out`; returns its vocabulary size (the model's embedding matches it exactly: a
    larger embedding would sample ids the tokenizer cannot decode, which stream as empty chunks)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|begin_of_text|>",
        eos_token="<|eot_id|>",
        pad_token="<|end_of_text|>",
        model_max_length=MAX_POSITIONS,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return len(fast)


def build_model(shape: Shape, out: Path, vocab: int) -> int:
    """Random weights of `shape` in bf16 under `out`; returns the parameter count."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(SEED)
    common = dict(
        vocab_size=vocab,
        hidden_size=shape.hidden,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        intermediate_size=shape.intermediate,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=0,
        eos_token_id=4,
        pad_token_id=1,
        torch_dtype="bfloat16",
    )
    if shape.family == "qwen2":
        config = Qwen2Config(**common, tie_word_embeddings=True)
        model = Qwen2ForCausalLM(config)
    else:
        config = LlamaConfig(**common, tie_word_embeddings=False)
        model = LlamaForCausalLM(config)
    model = model.to(torch.bfloat16)
    model.save_pretrained(out)
    return sum(p.numel() for p in model.parameters())


def recipe(shape: Shape) -> dict[str, object]:
    corpus = hashlib.sha256("\n".join(_corpus()).encode()).hexdigest()[:16]
    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
    return {"shape": asdict(shape), "seed": SEED, "vocab": VOCAB_SIZE, "corpus": corpus, "builder": code}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder the models go under (one subfolder each)")
    ap.add_argument(
        "--shapes", default=",".join(DEFAULT_SHAPES), help=f"comma-separated, of: {', '.join(SHAPES)}"
    )
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.shapes.split(",") if n.strip()]
    unknown = [n for n in names if n not in SHAPES]
    if unknown:
        print(
            f"build_models: unknown shape {', '.join(unknown)} (known: {', '.join(SHAPES)})", file=sys.stderr
        )
        return 2
    for name in names:
        shape = SHAPES[name]
        out = Path(args.out) / name
        stamp = out / "sizing-recipe.json"
        want = recipe(shape)
        if stamp.exists() and json.loads(stamp.read_text()) == want:
            print(f"{name}: up to date ({out})")
            continue
        out.mkdir(parents=True, exist_ok=True)
        vocab = build_tokenizer(out)
        params = build_model(shape, out, vocab)
        stamp.write_text(json.dumps(want, indent=1) + "\n")
        print(f"{name}: {params / 1e6:.1f} M parameters ({shape.family}, vocabulary {vocab}) -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
