"""The `/sizing` command's grammar: a chat message → a raw workload spec (the dict `sizing.workload.parse.parse_spec`
takes), or help, or a usage reply that says what was not understood.

The grammar is tolerant: words may come in any order, `<`, `<=`, `≤`, `=` and `:` are interchangeable between a
name and its value, spaces around them are optional, numbers may carry `k`/`m` suffixes or thousands commas,
filler words (`for`, `with`, `and`, ...) are ignored, and a preset (`chat` unless named) fills in everything the
message leaves out. Slack escapes `<`, `>` and `&` in slash-command text as HTML entities; they are unescaped first.

    /sizing 10k users llama-3.1-70b ttft<1s e2e<2.5s in=1500 out=200 chat
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from sizing.base.vocabulary import QUANTIZATIONS, CapacityType, Deployment, Quantization
from sizing.workload.parse import PRESETS

#: Preset used when the message names none: most people asking from chat describe an interactive assistant.
DEFAULT_PRESET = "chat"
#: Slack caps slash-command text at 4,000 characters (api.slack.com/interactivity/slash-commands); we need far
#: less, so anything longer is refused before parsing.
MAX_TEXT_CHARS = 4000

PRESET_ALIASES: dict[str, str] = {
    "chat": "chat",
    "chatbot": "chat",
    "assistant": "chat",
    "support": "chat",
    "rag": "rag",
    "retrieval": "rag",
    "search": "rag",
    "summarization": "summarization",
    "summarisation": "summarization",
    "summarize": "summarization",
    "summarise": "summarization",
    "summary": "summarization",
    "summaries": "summarization",
    "code-completion": "code-completion",
    "code": "code-completion",
    "completion": "code-completion",
    "autocomplete": "code-completion",
    "copilot": "code-completion",
    "batch": "batch",
    "offline": "batch",
}
#: Words for a deployment, a purchase option and a weight format, to the vocabulary's value (`sizing.base.vocabulary`).
DEPLOYMENTS: dict[str, Deployment] = {
    "eks": "eks",
    "k8s": "eks",
    "kubernetes": "eks",
    "sagemaker": "sagemaker",
    "bedrock": "bedrock",
}
CAPACITY: dict[str, CapacityType] = {"spot": "spot", "on-demand": "on-demand", "ondemand": "on-demand"}
#: fp16 is served as bf16 (the catalog's 16-bit format)
QUANTS: dict[str, Quantization] = {**{q: q for q in QUANTIZATIONS}, "fp16": "bf16", "float32": "fp32"}
FILLER = {
    "for",
    "with",
    "and",
    "on",
    "of",
    "a",
    "an",
    "the",
    "model",
    "workload",
    "using",
    "at",
    "please",
    "size",
    "sizing",
}
HELP_WORDS = {"", "help", "?", "-h", "--help", "usage", "examples"}
USER_WORDS = {"users", "user", "people", "seats", "employees", "customers", "agents"}
RATE_WORDS = {"rps": 1.0, "req/s": 1.0, "qps": 1.0, "requests/s": 1.0, "rpm": 1 / 60, "req/min": 1 / 60}
METRICS = {
    "ttft": "ttft_ms",
    "tpot": "tpot_ms",
    "itl": "tpot_ms",
    "tbt": "tpot_ms",
    "e2e": "e2e_s",
    "latency": "e2e_s",
    "e2el": "e2e_s",
}
#: A TTFT written without a unit is in milliseconds, except below this many, where only seconds make sense
#: (no serving stack answers in under 20 ms of prefill and network; `ttft<2` means two seconds).
TTFT_BARE_SECONDS_BELOW = 20
#: A TPOT written without a unit is in milliseconds; a value below this is surely seconds (0.05 = 50 ms).
TPOT_BARE_SECONDS_BELOW = 1
#: An e2e written without a unit is in seconds, except above this many, where only milliseconds make sense
#: (nobody waits 20 minutes for an interactive answer; `e2e<2500` means 2.5 s).
E2E_BARE_MS_ABOVE = 1200

EXAMPLES = (
    "10k users llama-3.1-70b ttft<1s e2e<2.5s in=1500 out=200 chat",
    "500 users llama-3.1-8b code ttft<300ms",
    "12 rps mixtral-8x7b rag",
    "2000 people meta-llama/Llama-3.1-70B-Instruct in=4000/8000 out=300 ttft<2s eks spot fp8",
    "40 rps llama-3.1-8b batch e2e<5min@p99",
    "2 rps llama-3.1-8b batch e2e<24h",
)

_METRIC_WORDS = "ttft|tpot|itl|tbt|e2e|e2el|latency"
_NUMBER = r"(\d+(?:\.\d+)?|\.\d+)\s*([km])?"
_SLO = re.compile(
    r"^(?P<metric>[a-z0-9]+?)(?:[@._](?P<pct1>p\d\d))?(?P<op><=|=<|<|=|:)?"
    r"(?P<value>\d+(?:\.\d+)?|\.\d+)(?P<unit>ms|s|sec|secs|seconds|min|m|h|hr|hrs|hours?)?(?:@(?P<pct2>p\d\d))?$"
)
_TOKENS = re.compile(
    r"^(?P<which>in|input|prompt|out|output|completion)(?:_tokens|tokens)?(?:=|:)"
    r"(?P<mean>\d+(?:\.\d+)?k?)(?:/(?P<p95>\d+(?:\.\d+)?k?))?$"
)
_KV = re.compile(r"^(?P<key>[a-z_]+)(?:=|:)(?P<value>.+)$")
_NUM_WORD = re.compile(rf"^{_NUMBER}$")
_NUM_THEN_WORD = re.compile(rf"^{_NUMBER}(?P<word>[a-z/]+)$")


@dataclass
class Parsed:
    """What a message asked for: `help`, a `spec` (raw workload spec + a one-line summary), or `usage` (the
    problems found, each a sentence for the person who typed the message)."""

    kind: Literal["help", "spec", "usage"]
    raw_spec: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    text: str = ""


def normalize(text: str) -> str:
    """Unescape Slack's entities, unify operators and quotes, glue `name < value unit` into one word."""
    t = html.unescape(text or "")
    t = t.replace("≤", "<=").replace("⩽", "<=").replace("“", "").replace("”", "").replace("`", "")
    t = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", t)  # thousands separators: 10,000 → 10000
    t = re.sub(r"[,;]", " ", t)
    t = re.sub(r"\s*(<=|=<|<|=|≤)\s*", r"\1", t)  # ttft < 1 s → ttft<1 s
    t = re.sub(r"(\d)\s+(ms|s|sec|secs|seconds|min|h|hr|hrs|hours?)\b", r"\1\2", t)  # 1 s → 1s
    t = re.sub(r"\bunder\s+", "<", t, flags=re.IGNORECASE)  # ttft under 1s → ttft<1s
    t = re.sub(r"\b(ttft|tpot|itl|tbt|e2e|e2el|latency)\s+(?=[<=.\d])", r"\1", t, flags=re.IGNORECASE)
    t = re.sub(r"(<=|=<|<|=)\s+", r"\1", t)
    t = re.sub(rf"\b({_METRIC_WORDS})\s+(p\d\d)\b", r"\1@\2", t, flags=re.IGNORECASE)  # ttft p99<1s
    t = re.sub(rf"\b(p\d\d)\s+({_METRIC_WORDS})(?=[<=:])", r"\2@\1", t, flags=re.IGNORECASE)  # p99 ttft<1s
    t = re.sub(r"\b(in|input|out|output|prompt|completion)\s+(?=\d)", r"\1=", t, flags=re.IGNORECASE)
    return " ".join(t.split())


#: Numbers are capped here: 400 nines parse to float infinity, and round(inf) raised OverflowError (a 502 from
#: the command route). The cap is above every bound of the spec, so validation refuses it, naming the field.
NUMBER_CAP = 1e18


def _number(num: str, suffix: str | None) -> float:
    scale = {"k": 1e3, "m": 1e6}.get(suffix or "", 1.0)
    return min(float(num) * scale, NUMBER_CAP)


def _tokens_value(text: str) -> float:
    return min(float(text[:-1]) * 1000 if text.endswith("k") else float(text), NUMBER_CAP)


def _slo_value(metric: str, value: float, unit: str | None) -> float:
    """A latency in the metric's own unit (ms for ttft/tpot, s for e2e)."""
    seconds = {"s": 1.0, "sec": 1.0, "secs": 1.0, "seconds": 1.0, "min": 60.0, "m": 60.0}
    seconds |= {"h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0}  # a batch deadline
    if unit == "ms":
        return value if metric != "e2e_s" else value / 1000
    if unit in seconds:
        s = value * seconds[unit]
        return s if metric == "e2e_s" else s * 1000
    if metric == "ttft_ms":
        return value * 1000 if value < TTFT_BARE_SECONDS_BELOW else value
    if metric == "tpot_ms":
        return value * 1000 if value < TPOT_BARE_SECONDS_BELOW else value
    return value / 1000 if value > E2E_BARE_MS_ABOVE else value


@dataclass
class _Reading:
    """What the words of one message said so far (`parse_command` reads them in order)."""

    raw: dict[str, Any] = field(default_factory=dict)
    slo: dict[str, dict[str, float]] = field(default_factory=dict)
    tokens: dict[str, dict[str, float | int]] = field(default_factory=dict)
    constraints: dict[str, Any] = field(default_factory=dict)
    models: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    preset: str | None = None

    def word(self, word: str, nxt: str) -> int:
        """Read one word (`nxt`: the next, lower-cased); how many words it took, counting itself."""
        low = word.lower()
        if low in FILLER:
            return 1
        for read in (self._preset, self._choice, self._tokens, self._slo, self._key_value):
            if read(word, low):
                return 1
        took = self._traffic(low, nxt)
        if took:
            return took
        if (
            re.search(r"[a-z]", low)
            and (re.search(r"\d", low) or "/" in low)
            and not re.search(r"[<>=]", low)
        ):
            self.models.append(word)  # llama-3.1-70b, meta-llama/Llama-3.1-70B-Instruct, Qwen2.5-7B
        else:
            self.unknown.append(word)
        return 1

    def _preset(self, word: str, low: str) -> bool:
        if not (low in PRESET_ALIASES or low.startswith("preset=") or low.startswith("preset:")):
            return False
        name = PRESET_ALIASES.get(low.split("=", 1)[-1].split(":", 1)[-1])
        if name is None:
            self.problems.append(f"unknown preset in `{word}`; use one of {', '.join(PRESETS)}")
        elif self.preset and self.preset != name:
            self.problems.append(f"two use cases given (`{self.preset}` and `{name}`); pick one")
        self.preset = name
        return True

    # every word reader takes (word, low); this one reads the lowered word only
    def _choice(self, word: str, low: str) -> bool:  # noqa: ARG002
        for key, words in (("deployments", DEPLOYMENTS), ("capacity", CAPACITY), ("quantizations", QUANTS)):
            if low in words:
                self.constraints.setdefault(key, []).append(words[low])
                return True
        return False

    def _traffic(self, low: str, nxt: str) -> int:
        """ "10k users", "12 rps", "720 rpm" (two words, or one: "12rps")."""
        m = _NUM_WORD.match(low)
        if m and (nxt in USER_WORDS or nxt in RATE_WORDS):
            self._set_traffic(_number(m.group(1), m.group(2)), nxt)
            return 2
        m = _NUM_THEN_WORD.match(low)
        if m and (m.group("word") in USER_WORDS or m.group("word") in RATE_WORDS):
            self._set_traffic(_number(m.group(1), m.group(2)), m.group("word"))
            return 1
        return 0

    def _set_traffic(self, value: float, unit: str) -> None:
        if unit in USER_WORDS:
            self.raw["users"] = {"total": round(value)}
        else:
            self.raw["rate"] = {"peak_rps": round(value * RATE_WORDS[unit], 6)}

    # every word reader takes (word, low); this one reads the lowered word only
    def _tokens(self, word: str, low: str) -> bool:  # noqa: ARG002
        m = _TOKENS.match(low)
        if not m:
            return False
        which = "input" if m.group("which") in ("in", "input", "prompt") else "output"
        mean = _tokens_value(m.group("mean"))
        if m.group("p95"):
            self.tokens[which] = {"mean": mean, "p95": _tokens_value(m.group("p95"))}
        else:
            self.tokens[which] = {"fixed": max(1, round(mean))}
        return True

    def _slo(self, word: str, low: str) -> bool:
        m = _SLO.match(low)
        if not (m and m.group("metric") in METRICS):
            return False
        metric = METRICS[m.group("metric")]
        pct = m.group("pct1") or m.group("pct2") or "p95"
        if pct not in ("p50", "p90", "p95", "p99"):
            self.problems.append(f"`{word}`: percentiles are p50, p90, p95 or p99")
            return True
        value = _slo_value(metric, float(m.group("value")), m.group("unit"))
        self.slo.setdefault(metric, {})[pct] = round(value, 6)
        return True

    def _key_value(self, word: str, low: str) -> bool:
        m = _KV.match(low)
        if not m:
            return False
        key, value_text = m.group("key"), m.group("value")
        if key == "model":
            self.models.append(re.split(r"[=:]", word, maxsplit=1)[1])
        elif not self._setting(key, value_text):
            self.unknown.append(word)
        return True

    def _setting(self, key: str, value_text: str) -> bool:
        """A `key=value` word other than the model; False when the key or its value is not understood."""
        if key in ("users", "user") and (n := _NUM_WORD.match(value_text)):
            self.raw["users"] = {"total": round(_number(n.group(1), n.group(2)))}
        elif key in ("rps", "rate", "qps") and (n := _NUM_WORD.match(value_text)):
            self.raw["rate"] = {"peak_rps": _number(n.group(1), n.group(2))}
        elif key == "region" and re.fullmatch(r"[a-z]{2}(-[a-z]+)+-\d", value_text):
            self.constraints["region"] = value_text
        elif key in ("budget", "max", "max_monthly_usd") and (
            n := re.fullmatch(r"\$?" + _NUMBER + r"(?:/mo(?:nth)?)?", value_text)
        ):
            self.constraints["max_monthly_usd"] = _number(n.group(1), n.group(2))
        elif key in ("replicas", "min_replicas", "min") and value_text.isdigit():
            self.constraints["min_replicas"] = int(value_text)
        else:
            return False
        return True

    def finish(self) -> list[str]:
        """The problems of the whole message (an unknown word may be a model named without digits)."""
        if not self.models and len(self.unknown) == 1 and re.fullmatch(r"[A-Za-z][\w.-]*", self.unknown[0]):
            self.models.append(self.unknown.pop())  # `mixtral` (the catalog suggests ids)
        problems = self.problems
        if self.unknown:
            problems.append("I did not understand " + ", ".join(f"`{w}`" for w in self.unknown))
        if len(self.models) > 1:
            problems.append(
                f"two models named ({', '.join(f'`{m}`' for m in self.models)}); size one model per message"
            )
        if not self.models:
            problems.append("which model? name one, e.g. `llama-3.1-70b`")
        if "users" in self.raw and "rate" in self.raw:
            problems.append("give users (`10k users`) or a request rate (`12 rps`), not both")
        if "users" not in self.raw and "rate" not in self.raw:
            problems.append(
                "how much traffic? say how many users (`10k users`) or requests per second (`12 rps`)"
            )
        return problems

    def spec(self) -> dict[str, Any]:
        raw = {"name": "slack", "model": self.models[0], "preset": self.preset or DEFAULT_PRESET, **self.raw}
        if self.tokens:
            base = PRESETS[raw["preset"]]["spec"].get("tokens", {})
            raw["tokens"] = {
                "input": self.tokens.get("input", base.get("input")),
                "output": self.tokens.get("output", base.get("output")),
            }
        if self.slo:
            raw["slo"] = self.slo
        if self.constraints:
            constraints = self.constraints
            for key in ("deployments", "capacity", "quantizations"):
                if key in constraints:
                    constraints[key] = list(dict.fromkeys(constraints[key]))
            raw["constraints"] = constraints
        return raw


def parse_command(text: str) -> Parsed:
    """Parse the text after `/sizing`. Never raises for bad input: returns kind="usage" with the problems."""
    if len(text or "") > MAX_TEXT_CHARS:
        return Parsed("usage", problems=[f"that message is longer than {MAX_TEXT_CHARS} characters"])
    norm = normalize(text)
    if norm.lower() in HELP_WORDS:
        return Parsed("help", text=norm)
    words = norm.split(" ")
    reading = _Reading()
    i = 0
    while i < len(words):
        i += reading.word(words[i], words[i + 1].lower() if i + 1 < len(words) else "")
    problems = reading.finish()
    if problems:
        return Parsed("usage", problems=problems, text=norm)
    return Parsed("spec", raw_spec=reading.spec(), text=norm)
