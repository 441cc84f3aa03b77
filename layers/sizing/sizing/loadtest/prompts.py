"""Prompts of the requested lengths: synthesized to a token distribution, or taken from a JSONL dataset."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sizing.base.distributions import STRATUM, TokenDistribution
from sizing.base.errors import InvalidInput, Problem
from sizing.base.tokens import CHAT_HEADER_TOKENS, CHAT_OVERHEAD_ONE_MESSAGE, count_tokens, synth_text

#: Tokens of the unique marker that starts every synthesized prompt after the workload's shared prefix ("r" + 7
#: base-36 characters = 8 characters = 2 tokens by the twin's tokenizer), so a server's prefix cache reuses what
#: the workload says every prompt shares (`tokens.shared_prefix`) and nothing more.
MARKER_TOKENS = 2
#: Markers a prompt source can draw: 36^7 (7.8e10). Each source starts at a random one and counts up, so two users
#: send the same marker only where their runs of markers overlap: at 10,000 users of 1,000 requests each, about 1
#: chance in 1,500 (the decimal markers of 10^6 starts overlapped somewhere in most grids: a level of the engine
#: grid got 17% of its prompt tokens from the prefix cache).
MARKER_SPACE = 36**7


def marker(n: int) -> str:
    """The 8-character marker of a prompt source's `n`-th request ("r" and 7 base-36 digits)."""
    return "r" + np.base_repr(n % MARKER_SPACE, 36).lower().rjust(7, "0")


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
        self._n = int(self.rng.integers(0, MARKER_SPACE))
        #: lengths drawn a stratified block at a time (`TokenDistribution.sample`): every STRATUM requests hold the
        #: distributions' quantiles, as the estimate's simulated requests do
        self._outputs: list[int] = []
        self._inputs: list[int] = []
        header = CHAT_HEADER_TOKENS if chat else 0
        self.prefix_tokens = max(0, shared_prefix - header) if shared_prefix > 0 else 0
        self.prefix_text = (
            synth_text(self.prefix_tokens, offset=SHARED_PREFIX_OFFSET) + " " if shared_prefix else ""
        )

    def next(self) -> PromptItem:
        self._n += 1
        if not self._outputs:
            self._outputs = self.output_dist.sample(self.rng, STRATUM, stratified=True).tolist()[::-1]
        out = int(self._outputs.pop())
        overhead = CHAT_OVERHEAD_ONE_MESSAGE if self.chat else 0
        if self.dataset:
            row = self.dataset[int(self.rng.integers(0, len(self.dataset)))]
            text = str(row["prompt"])
            out = int(row.get("output_tokens") or row.get("max_tokens") or out)
            return PromptItem(text, count_tokens(text) + overhead, max(1, out))
        if not self._inputs:
            self._inputs = self.input_dist.sample(self.rng, STRATUM, stratified=True).tolist()[::-1]
        n_in = int(self._inputs.pop())
        body = max(0, n_in - overhead - self.prefix_tokens - MARKER_TOKENS)
        text = self.prefix_text + marker(self._n) + " " + synth_text(body, offset=self._n)
        return PromptItem(text, self.prefix_tokens + MARKER_TOKENS + body + overhead, max(1, out))


class ReplayPrompts:
    """Prompts of a replayed trace (`sizing.loadtest.config.ReplaySpec`): request i has the trace's prompt and
    answer lengths, and requests of one prefix key start with the same text -- that key's, for as long as the
    longest hit of the key in the trace -- so a server's prefix cache serves what the trace's did. The keys' texts
    depend on the run's seed: two runs share no prefix. The rest of each prompt is its own."""

    def __init__(
        self, input_tokens: list[int], output_tokens: list[int], hit_tokens: list[int], prefix_keys: list[int],
        *, chat: bool, run_seed: int, seed: int,
    ) -> None:  # fmt: skip
        self.inp, self.out, self.hit, self.keys = input_tokens, output_tokens, hit_tokens, prefix_keys
        self.chat = chat
        self.run_seed = run_seed
        self._n = int(np.random.default_rng(seed).integers(0, MARKER_SPACE))
        self.key_tokens: dict[int, int] = {}
        for key, hit in zip(prefix_keys, hit_tokens, strict=True):
            if key and hit > self.key_tokens.get(key, 0):
                self.key_tokens[key] = hit

    def _key_offset(self, key: int) -> int:
        """Where the key's text starts in the vocabulary: the same in every process of a run, not across runs."""
        return (key * 1_000_003 + self.run_seed * 7_919) % (2**31)

    def item(self, i: int) -> PromptItem:
        """The prompt of the trace's request `i`."""
        self._n += 1
        overhead = CHAT_OVERHEAD_ONE_MESSAGE if self.chat else 0
        header = CHAT_HEADER_TOKENS if self.chat else 0
        n_in, key = self.inp[i], self.keys[i]
        room = max(0, n_in - overhead - MARKER_TOKENS)
        shared = min(max(0, self.key_tokens.get(key, 0) - header), room) if key else 0
        body = room - shared
        prefix = synth_text(shared, offset=self._key_offset(key)) + " " if shared else ""
        text = prefix + marker(self._n) + " " + synth_text(body, offset=self._n)
        return PromptItem(text, shared + MARKER_TOKENS + body + overhead, max(1, self.out[i]))


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
