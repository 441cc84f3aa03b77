"""The arithmetic of one engine step's time, over the coefficients a step model derived (`sizing.perf.step`).

`StepModel` works out the coefficients (seconds per token of compute, per byte of weights and KV, per all-reduce,
the engine's overheads and compiled shapes); a `StepTime` is a snapshot of them that times steps. The simulator
takes one snapshot per run, so this module is one of the four its hot loop is made of (`sizing.perf.native`:
compiled to C where a compiler is at hand, the same source either way).
"""

from __future__ import annotations

#: A pure-decode step of D sequences (`StepTime.decode_lines`): time(C) = max(c0 + c1 C, m0 + m1 C) + o for a
#: context of C tokens.
DecodeLines = tuple[float, float, float, float, float]
#: `StepTime`'s arguments, in order: what a step model hands the simulator (`StepModel.step_time_terms`).
StepTimeTerms = tuple[
    float,
    float,
    float,
    float,
    float,
    float,
    bool,
    float,
    float,
    float,
    float,
    int,
    bool,
    int,
    tuple[int, ...],
    float,
]


def ridge(compute: float, memory: float, p: float) -> float:
    """The time of a phase whose compute and memory traffic take `compute` and `memory` seconds each at their
    roofs, overlapped as far as exponent `p` says: (compute^p + memory^p)^(1/p). p -> infinity is the roofline's
    hard max (perfect overlap; `p` <= 0 stands for it), p = 1 their sum (no overlap, the ECM model's non-overlapping
    limit). Never below the larger of the two, never above their sum; furthest above the max where the two are
    equal (the ridge: 2^(1/p) times either), and 1-homogeneous (scaling both scales the time), so a phase linear in
    the context stays linear."""
    hi = compute if compute > memory else memory
    if p <= 0.0 or hi <= 0.0:
        return hi
    lo = memory if compute > memory else compute
    scale: float = (1.0 + (lo / hi) ** p) ** (1.0 / p)  # a positive base: a real power (typeshed says Any)
    return hi * scale


def decode_batch_buckets(max_num_seqs: int) -> tuple[int, ...]:
    """The batch sizes a Neuron engine compiles its decode graph for: powers of two up to the compiled batch, and
    the compiled batch itself. vllm-neuron builds one decode graph per `num_seqs` bucket [docs/serving-facts.md s3:
    vllm-neuron additional-config] and runs a step at the smallest that holds the running sequences; powers of
    two are its bucket rule for prompts and assumed for batches. (Padding every step to the compiled batch made an
    idle Qwen3-30B-A3B on trn2 read 225 rows of KV a token: a 60-80 ms TPOT floor at any TP.)"""
    out, b = [], 1
    while b < max_num_seqs:
        out.append(b)
        b *= 2
    out.append(max(1, max_num_seqs))
    return tuple(out)


def padded_to_bucket(tokens: int, buckets: tuple[int, ...]) -> int:
    """`tokens` padded to the smallest bucket that holds them (the largest bucket when none does)."""
    for b in buckets:
        if b >= tokens:
            return b
    return max(tokens, buckets[-1]) if buckets else tokens


class StepTime:
    """Seconds per engine step from a step model's coefficients (see `sizing.perf.step` for what each is):
      linear    = ridge(c_tok x tokens, weights touched, ridge_p)
      attention = max(c_pair x (attention pairs + context read), kv_tok x (context read + prefill tokens written
                  twice))
      step      = linear + attention + ar_fixed + ar_tok x tokens + o_step + o_seq x sequences.
    The two phases run one after the other (the matmul kernels, then the attention kernels), so one's compute
    does not hide the other's memory traffic: a fused max(compute, memory) over the whole step hid a mixed step's
    decode KV reads under its prefill matmuls (docs/engine.md, "Dynamics"). Within the linear phase a GEMM overlaps
    its weight reads with its math imperfectly: `ridge` composes the two with the profile's exponent `ridge_p`
    (`Profile.ridge_slowdown`; 0, the roofline's max, in the shipped profiles), which slows the steps whose compute
    and weight-streaming times are comparable (decode batches of a few hundred tokens on a GPU, mixed chunked-prefill
    steps) and leaves the clearly bound ones as the roofline has them. Attention keeps the hard max: its phase sits
    far from its own ridge (docs/estimator.md, "The linear phase near the ridge").
    A MoE batch touches the routed experts only (`moe`, `route_miss`); a Neuron engine pads prompts to its
    compiled buckets, runs decode at the smallest compiled batch bucket that holds the running sequences
    (`decode_batch_buckets`) and reads its compiled context (`prefill_buckets`, `static_decode_batch`,
    `static_ctx`)."""

    __slots__ = (
        "ar_fixed",
        "ar_tok",
        "c_pair",
        "c_tok",
        "decode_buckets",
        "kv_tok",
        "max_num_seqs",
        "moe",
        "o_seq",
        "o_step",
        "prefill_buckets",
        "ridge_p",
        "route_miss",
        "static_ctx",
        "static_decode_batch",
        "w_dense",
        "w_expert",
    )

    def __init__(
        self,
        c_tok: float,
        c_pair: float,
        kv_tok: float,
        w_dense: float,
        w_expert: float,
        route_miss: float,
        moe: bool,
        ar_fixed: float,
        ar_tok: float,
        o_step: float,
        o_seq: float,
        static_ctx: int,
        static_decode_batch: bool,
        max_num_seqs: int,
        prefill_buckets: tuple[int, ...],
        ridge_p: float = 0.0,
    ):
        self.c_tok = c_tok
        self.c_pair = c_pair
        self.kv_tok = kv_tok
        self.w_dense = w_dense
        self.w_expert = w_expert
        self.route_miss = route_miss
        self.moe = moe
        self.ar_fixed = ar_fixed
        self.ar_tok = ar_tok
        self.o_step = o_step
        self.o_seq = o_seq
        self.static_ctx = static_ctx
        self.static_decode_batch = static_decode_batch
        self.max_num_seqs = max_num_seqs
        self.prefill_buckets = prefill_buckets
        #: the linear phase's overlap exponent (`ridge`; 0: the roofline's hard max)
        self.ridge_p = ridge_p
        self.decode_buckets: tuple[int, ...] = (
            decode_batch_buckets(max_num_seqs) if static_decode_batch else ()
        )

    def weights_time(self, tokens: int) -> float:
        """Seconds to read the weights a step of `tokens` touches (a MoE batch: the experts its tokens route to)."""
        if not self.moe or tokens <= 0:
            return self.w_dense + self.w_expert
        return self.w_dense + self.w_expert * (1.0 - self.route_miss**tokens)

    def iteration_time(
        self,
        prefill_tokens: int,
        decode_seqs: int,
        context_tokens: float,
        prefill_attention_pairs: float | None = None,
        prefill_seqs: int = 1,
    ) -> float:
        """Seconds for one engine step. `prefill_attention_pairs` (query x key pairs of the prefill chunks)
        defaults to one chunk starting from an empty context: prefill_tokens^2 / 2."""
        if prefill_tokens + decode_seqs <= 0:
            return 0.0
        pairs = (
            prefill_tokens * prefill_tokens / 2
            if prefill_attention_pairs is None
            else prefill_attention_pairs
        )
        seqs = decode_seqs + (prefill_seqs if prefill_tokens else 0)
        computed = prefill_tokens
        if self.prefill_buckets and prefill_tokens:
            # each prompt is encoded padded to its compiled bucket: the padding costs FLOPs, not KV
            n = max(1, prefill_seqs)
            computed = n * padded_to_bucket(-(-prefill_tokens // n), self.prefill_buckets)
            pairs *= (computed / prefill_tokens) ** 2
        if self.static_decode_batch and decode_seqs:
            decode_seqs = padded_to_bucket(decode_seqs, self.decode_buckets)
        tokens = computed + decode_seqs
        # a Neuron decode step reads the compiled context of every row, whatever the sequences hold
        context = float(decode_seqs * self.static_ctx) if self.static_ctx else context_tokens
        # two phases one after the other, each bound by its own roofline: the linear layers (matmuls over the
        # step's tokens, streaming the weights; their overlap imperfect near the ridge) and attention (query x key
        # pairs, reading the KV cache)
        linear = ridge(self.c_tok * tokens, self.weights_time(tokens), self.ridge_p)
        attention_c = self.c_pair * (pairs + context)
        attention_m = self.kv_tok * (context + 2 * prefill_tokens)
        return (
            linear
            + (attention_c if attention_c > attention_m else attention_m)
            + self.ar_fixed
            + self.ar_tok * tokens
            + self.o_step
            + self.o_seq * seqs
        )

    def decode_lines(self, decode_seqs: int) -> DecodeLines:
        """A pure-decode step with `decode_seqs` sequences as two lines in the context size C plus a constant:
        time(C) = max(c0 + c1*C, m0 + m1*C) + o. The simulator sums runs of such steps in closed form. With the
        phases apart the two lines are one: the linear phase's larger term plus C times attention's larger per-token
        term."""
        seqs = decode_seqs
        if self.static_decode_batch and decode_seqs:
            decode_seqs = padded_to_bucket(decode_seqs, self.decode_buckets)
        # the linear layers' phase: its compute and its weights, composed as `iteration_time` composes them
        linear = ridge(self.c_tok * decode_seqs, self.weights_time(decode_seqs), self.ridge_p)
        o = self.ar_fixed + self.ar_tok * decode_seqs + self.o_step + self.o_seq * seqs
        # attention's phase grows with the context: its compute or its KV reads, whichever is larger per token
        per_ctx = self.c_pair if self.c_pair > self.kv_tok else self.kv_tok
        if self.static_ctx:  # every step reads the compiled context, whatever the sequences hold
            fixed = linear + per_ctx * decode_seqs * self.static_ctx
            return fixed, 0.0, fixed, 0.0, o
        return linear, per_ctx, linear, per_ctx, o
