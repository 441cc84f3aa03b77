"""Prompts of the requested lengths: synthesized to a token distribution, or drawn from a JSONL dataset."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from sizing.base.distributions import TokenDistribution
from sizing.base.errors import InvalidInput
from sizing.base.tokens import block_hashes, chat_token_pieces, chat_tokens, count_tokens
from sizing.loadtest.prompts import PromptSource, load_dataset


def test_synthesized_chat_prompts_have_the_drawn_length_as_the_twin_counts_it() -> None:
    # given a lognormal input distribution
    src = PromptSource(
        TokenDistribution.from_mean_p95(800, 2000), TokenDistribution.fixed(64), chat=True, seed=1
    )
    items = [src.next() for _ in range(200)]
    # then every prompt counts exactly its stated tokens, as a chat request, and they follow the distribution
    for it in items[:20]:
        assert chat_tokens([{"role": "user", "content": it.text}]) == it.input_tokens
    assert np.mean([it.input_tokens for it in items]) == pytest.approx(800, rel=0.15)
    assert {it.max_tokens for it in items} == {64}
    # and no two prompts share a beginning (a prefix cache cannot serve one from another)
    assert len({it.text[:12] for it in items}) == len(items)


def test_thousands_of_users_never_send_the_same_prompt() -> None:
    # given 2,000 users (seeds 0-1,999), each sending 40 requests of 24-token prompts
    starts = set()
    for seed in range(2000):
        src = PromptSource(TokenDistribution.fixed(24), TokenDistribution.fixed(8), chat=True, seed=seed)
        starts.update(src.next().text[:8] for _ in range(40))
    # then every one of the 80,000 prompts begins differently, so no prompt is served from another's prefix cache
    # entry (with decimal markers started anywhere in a million, 2,912 of them repeated another user's)
    assert len(starts) == 80_000


def test_the_same_seed_gives_the_same_prompts() -> None:
    def draw(seed: int) -> list[str]:
        src = PromptSource(TokenDistribution.fixed(100), TokenDistribution.fixed(10), chat=False, seed=seed)
        return [src.next().text for _ in range(5)]

    assert draw(7) == draw(7)
    assert draw(7) != draw(8)


def test_dataset_rows_give_the_prompt_and_their_own_output_length(tmp_path: Path) -> None:
    path = tmp_path / "prompts.jsonl"
    rows = [{"prompt": "what is the capital of france", "output_tokens": 12},
            {"messages": [{"role": "user", "content": "hello there"}]}]  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    src = PromptSource(TokenDistribution.fixed(1), TokenDistribution.fixed(50), chat=False, seed=0,
                       dataset=load_dataset(path))  # fmt: skip
    items = {src.next() for _ in range(20)}
    assert {(i.text, i.max_tokens) for i in items} == {
        ("what is the capital of france", 12),
        ("hello there", 50),
    }
    assert {i.input_tokens for i in items} == {
        count_tokens("what is the capital of france"),
        count_tokens("hello there"),
    }


def test_a_dataset_row_without_a_prompt_is_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "ok"}\n{"text": "no prompt field"}\n')
    with pytest.raises(InvalidInput, match=r"bad\.jsonl:2"):
        load_dataset(path)


@pytest.mark.parametrize("seeds", [(1, 1), (1, 2)])
def test_prompts_share_the_workloads_prefix_and_nothing_more(seeds: tuple[int, int]) -> None:
    # given a chat workload whose prompts start with a 600-token system prompt, drawn by two Locust users (the
    # same seed twice, or two seeds)
    def draw(seed: int) -> list:
        src = PromptSource(
            TokenDistribution.lognormal(1200, 0.3), TokenDistribution.fixed(64), chat=True, seed=seed,
            shared_prefix=600,
        )  # fmt: skip
        return [src.next() for _ in range(20)]

    a, b = draw(seeds[0]), draw(seeds[1])
    for x, y in zip(a, b[1:], strict=False):
        messages = [[{"role": "user", "content": it.text}] for it in (x, y)]
        # then each prompt still counts its stated tokens, as the twin counts a chat request
        assert chat_tokens(messages[0]) == x.input_tokens
        # and two prompts have the same first 600 tokens (chat template header included) and differ right after,
        # so a prefix cache of 16-token blocks serves the 37 full blocks of the prefix and no block past it
        pieces = [chat_token_pieces(m) for m in messages]
        assert pieces[0][:600] == pieces[1][:600] and pieces[0][600:603] != pieces[1][600:603]
        blocks = [block_hashes(p, 16) for p in pieces]
        common = sum(1 for _ in itertools.takewhile(lambda hk: hk[0] == hk[1], zip(*blocks, strict=False)))
        assert common == 600 // 16
