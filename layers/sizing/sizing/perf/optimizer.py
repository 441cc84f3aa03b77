"""A plain Nelder-Mead minimiser for the calibration's few smooth parameters (`sizing.perf.fit`). The
procedure needs a handful of parameters and no gradients; scipy would add ~100 MB to the Lambda layer for it."""

from __future__ import annotations

from collections.abc import Callable


def nelder_mead(
    f: Callable[[list[float]], float], x0: list[float], step: float = 0.3, *, max_evals: int
) -> list[float]:
    """A plain Nelder-Mead minimiser (no scipy dependency): enough for a handful of smooth parameters."""
    n = len(x0)
    pts = [list(x0)] + [[x + (step if i == j else 0.0) for j, x in enumerate(x0)] for i in range(n)]
    vals = [f(p) for p in pts]
    evals = n + 1
    while evals < max_evals:
        order = sorted(range(n + 1), key=lambda i: vals[i])
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        if abs(vals[-1] - vals[0]) < 1e-6 * (1 + abs(vals[0])):
            break
        centroid = [sum(p[j] for p in pts[:-1]) / n for j in range(n)]
        refl = [c + (c - w) for c, w in zip(centroid, pts[-1], strict=True)]
        fr = f(refl)
        evals += 1
        if fr < vals[0]:
            exp = [c + 2 * (c - w) for c, w in zip(centroid, pts[-1], strict=True)]
            fe = f(exp)
            evals += 1
            pts[-1], vals[-1] = (exp, fe) if fe < fr else (refl, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = refl, fr
        else:
            con = [c + 0.5 * (w - c) for c, w in zip(centroid, pts[-1], strict=True)]
            fc = f(con)
            evals += 1
            if fc < vals[-1]:
                pts[-1], vals[-1] = con, fc
            else:
                for i in range(1, n + 1):
                    pts[i] = [b + 0.5 * (p - b) for b, p in zip(pts[0], pts[i], strict=True)]
                    vals[i] = f(pts[i])
                    evals += 1
    best = min(range(len(vals)), key=lambda i: vals[i])
    return pts[best]
