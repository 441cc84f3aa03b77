"""Prompts of the requested lengths: synthesized to a token distribution, or taken from a JSONL dataset."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sizing.base.distributions import TokenDistribution
from sizing.base.errors import InvalidInput, Problem
from sizing.base.tokens import CHAT_HEADER_TOKENS, CHAT_OVERHEAD_ONE_MESSAGE, count_tokens, synth_text

#: Tokens of the unique marker that starts every synthesized prompt after the workload's shared prefix ("r" + 7
#: digits = 8 characters = 2 tokens by the twin's tokenizer), so a server's prefix cache reuses what the workload
#: says every prompt shares (`tokens.shared_prefix`) and nothing more.
MARKER_TOKENS = 2
#: Where in VOCABULARY the shared prefix's text starts: one text for every user, process and run.
SHARED_PREFIX_OFFSET = 0


@dataclass(frozen=True)
class PromptItem:
    """One request to send: the user text, its expected token count (as a chat prompt when `chat`), and the
    number of tokens to ask for."""

    text: str
    input_tokens: int
    max_tokens: int


class PromptSource:
    """Draws requests. Deterministic for a seed; each Locust user makes its own with a distinct seed.

    `shared_prefix`: tokens at the start of every prompt that all requests share (the workload's
    `tokens.shared_prefix`, which the estimate credits to the server's prefix cache): every synthesized prompt
    starts with the same text, so a server that caches prefixes serves them as the estimate assumed. A chat
    prompt's template header counts towards it (it precedes the text in every request). The rest of the prompt
    is the request's own. Dataset prompts are sent as they are."""

    def __init__(
        self, input_dist: TokenDistribution, output_dist: TokenDistribution, *, chat: bool, seed: int,
        dataset: list[dict[str, Any]] | None = None, shared_prefix: int = 0,
    ) -> None:  # fmt: skip
        self.rng = np.random.default_rng(seed)
        self.input_dist = input_dist
        self.output_dist = output_dist
        self.chat = chat
        self.dataset = dataset
        self._n = int(self.rng.integers(0, 10**6))
        header = CHAT_HEADER_TOKENS if chat else 0
        self.prefix_tokens = max(0, shared_prefix - header) if shared_prefix > 0 else 0
        self.prefix_text = (
            synth_text(self.prefix_tokens, offset=SHARED_PREFIX_OFFSET) + " " if shared_prefix else ""
        )

    def next(self) -> PromptItem:
        self._n += 1
        out = int(self.output_dist.sample(self.rng, 1)[0])
        overhead = CHAT_OVERHEAD_ONE_MESSAGE if self.chat else 0
        if self.dataset:
            row = self.dataset[int(self.rng.integers(0, len(self.dataset)))]
            text = str(row["prompt"])
            out = int(row.get("output_tokens") or row.get("max_tokens") or out)
            return PromptItem(text, count_tokens(text) + overhead, max(1, out))
        n_in = int(self.input_dist.sample(self.rng, 1)[0])
        body = max(0, n_in - overhead - self.prefix_tokens - MARKER_TOKENS)
        text = self.prefix_text + f"r{self._n % 10**7:07d} " + synth_text(body, offset=self._n)
        return PromptItem(text, self.prefix_tokens + MARKER_TOKENS + body + overhead, max(1, out))


def load_dataset(path: str | Path) -> list[dict[str, Any]]:
    """JSONL rows with `prompt` (text) and optionally `output_tokens`; `messages` (chat) rows are flattened."""
    p = Path(path)
    rows: list[dict[str, Any]] = []
    try:
        lines = p.read_text().splitlines()
    except OSError as exc:
        raise InvalidInput(f"cannot read dataset {p}: {exc.strerror}", [Problem("dataset", str(p))]) from None
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise InvalidInput(f"{p}:{i} is not JSON", [Problem("dataset", f"line {i}")]) from None
        if "prompt" not in row and isinstance(row.get("messages"), list):
            row["prompt"] = "\n".join(str(m.get("content", "")) for m in row["messages"])
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
            raise InvalidInput(
                f"{p}:{i} has no prompt", [Problem("dataset", f"line {i}: give prompt or messages")]
            )
        rows.append(row)
    if not rows:
        raise InvalidInput(f"dataset {p} is empty", [Problem("dataset", "no rows")])
    return rows
