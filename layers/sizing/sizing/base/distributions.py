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

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        import numpy as np

        if self.kind == "fixed":
            return np.full(n, round(self.mean), dtype=np.int64)
        if self.kind == "lognormal":
            x = rng.lognormal(self.mu, self.sigma, n)
            return np.clip(np.rint(x), 1, MAX_TOKENS).astype(np.int64)
        return rng.choice(np.asarray(self.samples, dtype=np.int64), n)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "mean": round(self.mean, 1)}
        out.update({q: round(self.percentile(q), 1) for q in ("p50", "p95", "p99")})
        if self.kind == "lognormal":
            out.update({"mu": round(self.mu, 4), "sigma": round(self.sigma, 4)})
        return out
