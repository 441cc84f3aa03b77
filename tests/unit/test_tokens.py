"""The approximate tokenizer the twin counts prompts with and the harness builds prompts with."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sizing.tokens import CHAT_OVERHEAD_ONE_MESSAGE, chat_tokens, count_tokens, synth_text


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
