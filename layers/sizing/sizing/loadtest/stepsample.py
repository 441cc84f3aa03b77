"""A level's engine steps, kept small enough to store beside its figures.

`sizing.loadtest.steps.rebuild` gives a level's engine steps back from its request records; a level of a few
minutes has thousands of them, and the records behind them are not kept. What the learning loop needs of them --
how long steps of each make-up took, and what a request costs before its first step -- fits in a sample: up to
`STEPS_KEPT` timed steps picked evenly through the level, and the first tokens of requests that reached an idle
engine. The sample travels with the level's record (`StepResult.engine_steps`) and with its stored measurement, and
`sizing.learn.stepcorrection` fits the step time's factors to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from sizing.base.strict import Strict

#: Timed steps a level keeps: the fit of four factors settles within 2% of its value on all of a level's steps from
#: 300-400 of them (small-llama's 3,155 steps, subsampled), and 400 rows of five numbers are ~12 KB of a stored record.
STEPS_KEPT = 400
#: First tokens at an idle engine a level keeps (their median is the per-request cost; 50 set it within a few ms).
IDLE_KEPT = 50


@dataclass(frozen=True)
class EngineStep:
    """One engine step as the client saw it."""

    end: float  # epoch seconds when its first chunk reached the client
    #: since the previous step's tokens; None where the engine may have idled before it, or the client read it late
    duration_s: float | None
    decode_seqs: int  # sequences that got a later token
    prefills: int  # requests that got their first token: prompts whose prefill ended in this step
    prefill_tokens: int  # those prompts' tokens
    context_tokens: int  # the decoding sequences' context: prompt and tokens so far
    spread_s: float  # from its first chunk to its last

    @property
    def prefill_pairs(self) -> float:
        """Query x key pairs of its prefills' attention, each prompt from an empty context (the mean prompt's)."""
        return self.prefills * (self.prefill_tokens / self.prefills) ** 2 / 2 if self.prefills else 0.0


class StepsSample(Strict):
    """A level's timed engine steps (a sample of them) and its first tokens at an idle engine."""

    rebuilt: int = Field(ge=0, description="steps rebuilt from the level's requests")
    timed: int = Field(ge=0, description="of them timed: work was waiting when the step before ended")
    #: [duration ms, sequences decoded, prompts finished, their tokens, the decoding sequences' context tokens]
    steps: list[tuple[float, int, int, int, int]] = Field(default_factory=list)
    #: [first token ms, prompt tokens] of requests sent while no other was in flight
    idle_first_tokens: list[tuple[float, int]] = Field(default_factory=list)

    def engine_steps(self) -> list[EngineStep]:
        """The kept steps as `EngineStep`s (their end times are not kept: 0)."""
        return [
            EngineStep(
                end=0.0,
                duration_s=ms / 1e3,
                decode_seqs=dec,
                prefills=pre,
                prefill_tokens=tok,
                context_tokens=ctx,
                spread_s=0.0,
            )
            for ms, dec, pre, tok, ctx in self.steps
        ]


__all__ = ["IDLE_KEPT", "STEPS_KEPT", "EngineStep", "StepsSample"]
