"""Slack's routes carry no IAM auth, so Slack's request signature is their only gate: any change to a signed
request (one byte of the body, the timestamp, the signature), a stale or replayed one, or a missing header is
refused; and the secrets behind it never reach a log line."""

from __future__ import annotations

import io
import logging
from urllib.parse import urlencode

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import SecretStr
from slack_sdk.signature import SignatureVerifier

from sizing.slack.verify import REPLAY_WINDOW_S, MemoryReplayGuard, Unauthorized, verify_request

SECRET = "8f2b1c0d9e7a6b5c4d3e2f1a0b9c8d7e"
NOW = 1_767_225_600.0
#: Tampered requests tried per property.
EXAMPLES = 300
BODY = urlencode(
    {
        "command": "/sizing",
        "text": "10k users llama-3.1-8b ttft<1s",
        "response_url": "https://hooks.slack.com/x",
    }
)


def _signed(body: str, ts: int) -> dict[str, str]:
    sig = SignatureVerifier(SECRET).generate_signature(timestamp=str(ts), body=body)
    return {"X-Slack-Request-Timestamp": str(ts), "X-Slack-Signature": str(sig)}


def _verify(body: str, headers: dict[str, str], guard: MemoryReplayGuard | None = None) -> None:
    verify_request(
        body,
        headers,
        SecretStr(SECRET),
        replay_guard=guard or MemoryReplayGuard(lambda: NOW),
        now=lambda: NOW,
    )


def test_a_genuine_request_passes_once_and_its_replay_is_refused():
    guard = MemoryReplayGuard(lambda: NOW)
    headers = _signed(BODY, int(NOW))
    _verify(BODY, headers, guard)
    with pytest.raises(Unauthorized):
        _verify(BODY, headers, guard)


@settings(max_examples=EXAMPLES, deadline=None)
@given(position=st.integers(min_value=0), byte=st.integers(min_value=0, max_value=255))
def test_any_one_byte_change_to_the_body_is_refused(position, byte, figures):
    figures.add("security.slack_tampered", requests=1)
    raw = bytearray(BODY.encode())
    i = position % len(raw)
    if raw[i] == byte:
        byte = (byte + 1) % 256
    raw[i] = byte
    tampered = raw.decode("utf-8", errors="replace")
    if tampered == BODY:
        return
    with pytest.raises(Unauthorized):
        _verify(tampered, _signed(BODY, int(NOW)))


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    signature=st.one_of(
        st.text(max_size=100),
        st.from_regex(r"v0=[0-9a-f]{64}", fullmatch=True),
        st.from_regex(r"v[1-9]=[0-9a-f]{64}", fullmatch=True),
    ),
    skew=st.integers(min_value=-(10**6), max_value=10**6),
)
def test_a_guessed_signature_or_a_shifted_timestamp_is_refused(signature, skew, figures):
    figures.add("security.slack_tampered", requests=2)
    genuine = _signed(BODY, int(NOW))
    # a guessed signature with the genuine timestamp
    if signature != genuine["X-Slack-Signature"]:
        with pytest.raises(Unauthorized):
            _verify(BODY, {**genuine, "X-Slack-Signature": signature})
    # the genuine signature with another timestamp (inside or outside the replay window)
    if skew != 0:
        with pytest.raises(Unauthorized):
            _verify(BODY, {**genuine, "X-Slack-Request-Timestamp": str(int(NOW) + skew)})


@pytest.mark.parametrize("age_s", [REPLAY_WINDOW_S + 1, -REPLAY_WINDOW_S - 1, 10 * 365 * 86400])
def test_a_request_signed_outside_the_window_is_refused(age_s):
    ts = int(NOW) - age_s
    with pytest.raises(Unauthorized, match="stale"):
        _verify(BODY, _signed(BODY, ts))


@pytest.mark.parametrize("missing", ["X-Slack-Request-Timestamp", "X-Slack-Signature"])
def test_a_request_without_a_signature_header_is_refused(missing):
    headers = {k: v for k, v in _signed(BODY, int(NOW)).items() if k != missing}
    with pytest.raises(Unauthorized):
        _verify(BODY, headers)


def test_refusals_never_name_the_secret_or_the_expected_signature(caplog):
    # given refusals of every kind, with every logger at DEBUG
    caplog.set_level(logging.DEBUG)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logging.getLogger().addHandler(handler)
    messages = []
    try:
        for headers in (
            {**_signed(BODY, int(NOW)), "X-Slack-Signature": "v0=" + "0" * 64},
            _signed(BODY, int(NOW) - 10 * REPLAY_WINDOW_S),
            {},
        ):
            try:
                _verify(BODY, headers)
            except Unauthorized as exc:
                messages.append(str(exc) + repr(exc.details))
    finally:
        logging.getLogger().removeHandler(handler)
    # then neither the secret nor the signature a forger would need appears anywhere
    expected = _signed(BODY, int(NOW))["X-Slack-Signature"]
    text = " ".join(messages) + stream.getvalue() + caplog.text
    assert len(messages) == 3
    assert SECRET not in text and expected not in text and expected[3:] not in text


class _Secrets:
    def signing_secret(self) -> SecretStr:
        return SecretStr(SECRET)

    def bot_token(self) -> SecretStr:
        raise AssertionError("a refused request needs no bot token")


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Slack-Request-Timestamp": str(int(NOW)), "X-Slack-Signature": "v0=é" + "0" * 63},
        {"X-Slack-Request-Timestamp": "١٧٦٧٢٢٥٦٠٠", "X-Slack-Signature": "v0=" + "0" * 64},
        {"X-Slack-Request-Timestamp": "", "X-Slack-Signature": ""},
    ],
)
def test_the_command_route_answers_401_to_odd_signature_headers_never_an_error(headers):
    from sizing.slack.bot import SlackBot, SlackRequest, answer

    # given the bot behind POST /slack/commands
    bot = SlackBot(
        secrets=_Secrets(), poster=None, replay_guard=MemoryReplayGuard(lambda: NOW), now=lambda: NOW
    )  # type: ignore[arg-type]
    # when a request arrives with non-ASCII or empty signature headers (a TypeError inside hmac, once)
    response = answer(bot.command, SlackRequest(body=BODY, headers=headers))
    # then it is refused like any forgery
    assert response.status == 401
