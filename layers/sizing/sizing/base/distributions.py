"""Token-length distributions (fixed, lognormal, empirical) and the percentiles they are read at: what the
estimator draws requests from. Plain Python (numpy only where samples are drawn), so the estimator does not import
the workload spec's models (`sizing.workload` builds these from a spec)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import numpy as np

PERCENTILES = ("p50", "p90", "p95", "p99")
#: z-scores of the standard normal at the percentiles we use ("p99.9" too): the inverse of its CDF.
Z = {q: NormalDist().inv_cdf(float(q[1:]) / 100) for q in (*PERCENTILES, "p99.9")}
#: Largest token count a distribution may produce: the longest context of any catalog model (Llama-4-Scout).
MAX_TOKENS = 10_485_760
#: Draws are stratified in blocks of this many (`stratified_uniforms`): every block holds one draw from each of
#: its equal-probability strata, in random order, so a p95 or p99 read over a few blocks is the distribution's,
#: not a sample's that happens to miss it. 100 strata put a p99 on the distribution's own 99th stratum; the
#: estimator's probes are a few blocks, a load level's hundreds a few.
STRATUM = 100


def stratified_uniforms(rng: np.random.Generator, n: int) -> np.ndarray:
    """n uniforms in (0, 1), stratified by blocks of STRATUM: the k-th block's m draws are (perm(m) + U) / m.

    Why: an i.i.d. sample's tail quantiles scatter widely. The estimator's 500 i.i.d. draws (seed 0) of the example
    chatbot's answer length (p95 160 tokens) have a p95 of 145; for its e2e SLO, which the answer length dominates,
    that moves an SLO capacity by tens of percent. A load level drawn this way holds the workload's distribution at
    every quantile a block resolves, whatever its seed (docs/loadgen.md, "Against the twin")."""
    import numpy as np

    out = np.empty(n)
    for start in range(0, n, STRATUM):
        m = min(STRATUM, n - start)
        out[start : start + m] = (rng.permutation(m) + rng.uniform(size=m)) / m
    return out


@dataclass(frozen=True)
class TokenDistribution:
    """A token-length distribution: fixed, lognormal(mu, sigma) or empirical samples. Draws are integers >= 1."""

    kind: Literal["fixed", "lognormal", "empirical"]
    mean: float
    mu: float = 0.0
    sigma: float = 0.0
    samples: tuple[int, ...] = ()

    @classmethod
    def fixed(cls, n: int) -> TokenDistribution:
        return cls("fixed", float(n))

    @classmethod
    def from_mean_p95(cls, mean: float, p95: float) -> TokenDistribution:
        """Fit a lognormal to a mean and a p95: mean = exp(mu + s^2/2), p95 = exp(mu + z95 s).
        Subtracting logs gives s^2/2 - z95 s + ln(p95/mean) = 0; the smaller root is the right-skewed fit."""
        if p95 <= mean:
            return cls.fixed(round(mean))
        d = math.log(p95 / mean)
        z = Z["p95"]
        sigma = z - math.sqrt(z * z - 2 * d)
        mu = math.log(mean) - sigma * sigma / 2
        return cls("lognormal", mean, mu, sigma)

    @classmethod
    def lognormal(cls, mean: float, sigma: float) -> TokenDistribution:
        return cls("lognormal", mean, math.log(mean) - sigma * sigma / 2, sigma)

    @classmethod
    def empirical(cls, samples: list[int]) -> TokenDistribution:
        # numpy where the numbers are (~0.2 s of import): parsing and validating a spec does not need it
        import numpy as np

        return cls("empirical", float(np.mean(samples)), samples=tuple(samples))

    def percentile(self, q: str) -> float:
        if self.kind == "fixed":
            return self.mean
        if self.kind == "lognormal":
            return math.exp(self.mu + Z[q] * self.sigma)
        import numpy as np

        return float(np.percentile(self.samples, float(q[1:])))

    def sample(self, rng: np.random.Generator, n: int, *, stratified: bool = False) -> np.ndarray:
        """n draws. `stratified`: by blocks of STRATUM (`stratified_uniforms`), so every block holds the
        distribution's quantiles (the estimator's simulations and the load generator's levels); else independent
        draws."""
        import numpy as np

        if self.kind == "fixed":
            return np.full(n, round(self.mean), dtype=np.int64)
        if not stratified:
            if self.kind == "lognormal":
                x = rng.lognormal(self.mu, self.sigma, n)
                return np.clip(np.rint(x), 1, MAX_TOKENS).astype(np.int64)
            return rng.choice(np.asarray(self.samples, dtype=np.int64), n)
        u = stratified_uniforms(rng, n)
        if self.kind == "lognormal":
            inv = NormalDist().inv_cdf
            z = np.fromiter((inv(float(p)) for p in u), dtype=float, count=n)
            x = np.exp(self.mu + self.sigma * z)
            return np.clip(np.rint(x), 1, MAX_TOKENS).astype(np.int64)
        ordered = np.sort(np.asarray(self.samples, dtype=np.int64))
        return ordered[np.minimum((u * len(ordered)).astype(np.int64), len(ordered) - 1)]

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "mean": round(self.mean, 1)}
        out.update({q: round(self.percentile(q), 1) for q in ("p50", "p95", "p99")})
        if self.kind == "lognormal":
            out.update({"mu": round(self.mu, 4), "sigma": round(self.sigma, 4)})
        return out
