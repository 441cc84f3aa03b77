"""A deterministic approximate tokenizer, shared by the twin (to count prompt tokens) and the load harness (to
synthesize prompts of a requested length).

Rule: the text is split into words (runs of letters/digits) and single punctuation marks; a word of n characters
counts ceil(n / 4) tokens, each punctuation mark one token. Four characters per token is the usual rule of thumb
for English with BPE tokenizers (OpenAI's tokenizer guide), and the common short words in `VOCABULARY` are one
token each in the Llama-3 and GPT tokenizers, so text built from them has about the same length for a real
server as for the twin. Chat requests add the Llama-3 chat template's special tokens (see `chat_tokens`).
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

#: Characters per token for words longer than one token (OpenAI's "about 4 characters per token" rule).
CHARS_PER_TOKEN = 4
#: Llama-3 chat template, as its special tokens: <|begin_of_text|> once; each message's header (role and "\n\n")
#: before its content and <|eot_id|> after it; the generation prompt is the assistant's header.
CHAT_BEGIN = ("<|begin_of_text|>",)
CHAT_END_OF_MESSAGE = ("<|eot_id|>",)


def chat_header(role: str) -> tuple[str, ...]:
    """The template's tokens before a message's content."""
    return ("<|start_header_id|>", role, "<|end_header_id|>", "\n\n")


CHAT_BOS_TOKENS = len(CHAT_BEGIN)
CHAT_PER_MESSAGE_TOKENS = len(chat_header("user")) + len(CHAT_END_OF_MESSAGE)
CHAT_GENERATION_PROMPT_TOKENS = len(chat_header("assistant"))
CHAT_OVERHEAD_ONE_MESSAGE = CHAT_BOS_TOKENS + CHAT_PER_MESSAGE_TOKENS + CHAT_GENERATION_PROMPT_TOKENS
#: Tokens before the first message's content: <|begin_of_text|> and the message's header.
CHAT_HEADER_TOKENS = CHAT_BOS_TOKENS + len(chat_header("user"))

#: Short, common English words: one token each here and (with the leading space) in real BPE vocabularies.
VOCABULARY: tuple[str, ...] = (
    "the", "of", "and", "to", "in", "is", "it", "that", "for", "on", "was", "with", "as", "at", "be", "this",
    "have", "from", "or", "one", "had", "by", "word", "but", "not", "what", "all", "were", "we", "when", "your",
    "can", "said", "use", "an", "each", "she", "do", "how", "if", "will", "up",
    "out", "many", "then", "them", "so", "some", "her", "make", "like",
    "him", "into", "time", "has", "look", "two", "more", "go", "see", "no", "way", "my", "than",
    "been", "call", "who", "its", "now", "find", "long", "down", "day", "did", "get", "come", "made",
    "may", "part",
)  # fmt: skip


#: One token of `count_tokens`' rule: up to CHARS_PER_TOKEN characters of a word (a longer word continues in the
#: next match), or one punctuation mark.
_PIECE = re.compile(rf"\w{{1,{CHARS_PER_TOKEN}}}|[^\w\s]")


def count_tokens(text: str) -> int:
    """Approximate token count of plain text (see the module docstring for the rule)."""
    return len(token_pieces(text))


def token_pieces(text: str) -> list[str]:
    """The tokens of plain text as `count_tokens` counts them (a word cut every CHARS_PER_TOKEN characters, each
    punctuation mark one): what the twin's prefix cache compares."""
    return _PIECE.findall(text)


def chat_token_pieces(messages: Iterable[Mapping[str, Any]]) -> list[str]:
    """The tokens of a chat request as `chat_tokens` counts them: the Llama-3 template's special tokens around
    every message's content, and the generation prompt."""
    out = list(CHAT_BEGIN)
    for m in messages:
        out += chat_header(str(m.get("role", "")))
        out += token_pieces(_content_text(m.get("content")))
        out += CHAT_END_OF_MESSAGE
    return [*out, *chat_header("assistant")]


def block_hashes(tokens: Sequence[Hashable], block_size: int) -> tuple[int, ...]:
    """The hashes of the full KV blocks of a prompt, each chained to the one before it (a block's hash names
    everything up to its end), as vLLM's prefix cache keys its blocks."""
    out: list[int] = []
    h = 0
    for start in range(0, len(tokens) - block_size + 1, block_size):
        h = hash((h, tuple(tokens[start : start + block_size])))
        out.append(h)
    return tuple(out)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts: [{"type": "text", "text": ...}, ...]
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return "" if content is None else str(content)


def chat_tokens(messages: Iterable[Mapping[str, Any]]) -> int:
    """Prompt tokens of a chat request: every message's content plus the chat template's special tokens."""
    return len(chat_token_pieces(messages))


def synth_text(n_tokens: int, offset: int = 0) -> str:
    """Text of exactly `n_tokens` tokens by `count_tokens`, built from `VOCABULARY` starting at `offset` (vary
    the offset between requests so a server's prefix cache cannot serve one prompt from another)."""
    size = len(VOCABULARY)
    return " ".join(VOCABULARY[(offset + i) % size] for i in range(max(0, n_tokens)))
