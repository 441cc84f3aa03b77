"""The approximate tokenizer the twin counts prompts with and the harness builds prompts with."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sizing.base.tokens import (
    CHAT_OVERHEAD_ONE_MESSAGE,
    block_hashes,
    chat_token_pieces,
    chat_tokens,
    count_tokens,
    synth_text,
    token_pieces,
)


def test_words_count_one_token_per_four_characters_and_punctuation_one_each() -> None:
    assert count_tokens("the cat") == 2
    assert count_tokens("internationalization!") == 6  # 20 letters -> 5, "!" -> 1
    assert count_tokens("") == 0


@given(st.integers(min_value=0, max_value=5000), st.integers(min_value=0, max_value=1000))
def test_synthesized_text_has_exactly_the_requested_tokens(n: int, offset: int) -> None:
    assert count_tokens(synth_text(n, offset)) == n


def test_a_chat_prompt_adds_the_chat_template_tokens() -> None:
    messages = [{"role": "user", "content": synth_text(100)}]
    assert chat_tokens(messages) == 100 + CHAT_OVERHEAD_ONE_MESSAGE


@given(st.text(max_size=300), st.text(max_size=50))
def test_the_tokens_the_prefix_cache_compares_are_the_tokens_counted(text: str, other: str) -> None:
    # a prompt's token pieces are as many as count_tokens says, for plain text and as a chat request
    assert len(token_pieces(text)) == count_tokens(text)
    messages = [{"role": "system", "content": other}, {"role": "user", "content": text}]
    assert len(chat_token_pieces(messages)) == chat_tokens(messages)


def test_block_hashes_name_a_block_by_everything_up_to_its_end() -> None:
    # two prompts that differ only in their first token share no block, though their later tokens are the same
    a, b = ["x", *range(47)], ["y", *range(47)]
    assert set(block_hashes(a, 16)).isdisjoint(block_hashes(b, 16))
    # a prompt that extends another keeps its blocks, and a partial block is not hashed
    assert block_hashes([*a, 1, 2, 3], 16)[:3] == block_hashes(a, 16) and len(block_hashes(a, 16)) == 3
