"""The prefix tracker: which prompt blocks a trace's requests have sent, and when, so each request's prefix hit (its
leading blocks seen before) and its reuse distance (prompt tokens sent since) are known; and the blocks of a
prompt that carries no hash_ids, derived from its session and prefix group."""

from __future__ import annotations

from typing import Any, Final

from sizing.traces.formats import MOONCAKE_BLOCK_TOKENS, Record

#: Prompt blocks the prefix tracker remembers (least recently used forgotten first): 2^20 blocks of 512 tokens,
#: half a billion tokens of distinct prefixes, far beyond any replica's KV cache (a few million tokens at most),
#: so forgetting never changes a hit a replica could have. A bound on memory (~100 MB at most), not a model figure.
TRACKED_BLOCKS: Final = 1 << 20


class Prefixes:
    """Which prompt blocks were seen, and when (in prompt tokens sent so far). Past TRACKED_BLOCKS the least
    recently used half is forgotten at once (amortised: one pass per TRACKED_BLOCKS / 2 new blocks). A request's
    hit is its leading blocks seen before, the way a prefix cache matches."""

    __slots__ = ("any_seen", "last", "sent", "total")

    def __init__(self) -> None:
        self.last: dict[Any, int] = {}
        self.sent = 0
        self.total = 0
        self.any_seen = 0

    def visit(self, blocks: list[Any], prompt: int) -> tuple[int, int]:
        """(prompt tokens hit, tokens sent since the oldest hit block's last use); then the blocks are used."""
        last, sent = self.last, self.sent
        get = last.get
        lead = 0
        oldest = sent
        for b in blocks:
            when = get(b)
            if when is None:
                break
            lead += 1
            if when < oldest:
                oldest = when
        before = len(last)
        last.update(dict.fromkeys(blocks, sent))
        self.any_seen += len(blocks) - (len(last) - before)
        self.total += len(blocks)
        self.sent = sent + prompt
        if len(last) > TRACKED_BLOCKS:
            self._forget()
        hit = min(lead * MOONCAKE_BLOCK_TOKENS, prompt - 1)
        return (hit, sent - oldest) if hit > 0 else (0, 0)

    def _forget(self) -> None:
        """Keep the more recently used half of the blocks."""
        cut = sorted(self.last.values())[len(self.last) // 2]
        self.last = {b: when for b, when in self.last.items() if when >= cut}


def derived_blocks(r: Record, group_len: dict[int, int]) -> list[Any]:
    """Blocks of a prompt without hash_ids, from its prefix group (the group's prefix first) and session (each
    turn's prompt holds the turns before): (id, block number) pairs, MOONCAKE_BLOCK_TOKENS tokens each."""
    blocks: list[Any] = []
    g = 0
    if r.group:
        glen = r.group_tokens if r.group_tokens >= 0 else min(group_len.get(r.group, r.inp), r.inp)
        group_len[r.group] = glen
        g = min(glen, r.inp) // MOONCAKE_BLOCK_TOKENS
        blocks = [(r.group, j) for j in range(g)]
    if r.session:
        blocks += [(r.session, j) for j in range(g, r.inp // MOONCAKE_BLOCK_TOKENS)]
    return blocks
