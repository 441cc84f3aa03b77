"""Small inline-SVG charts: an x/y chart (lines, points, reference lines, labelled markers) and bar charts.

Hand-written rather than drawn by a plotting library: the Lambda layer ships none (matplotlib 3.10's arm64 wheel
alone unpacks to 22 MB, measured, before Pillow, fonttools and its other dependencies), and every chart here is
plain text a test can parse. Each data mark carries `class="mark"`, so "the chart is not empty" is
checkable without a browser, and the data it was drawn from (`data-xy` on a line, `data-x`/`data-y` on a point or
marker, `data-at` on a reference line), so "the star lies on its curve" is checkable in the chart's own units
(`sizing.report.reading.chart_geometry`)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Literal

#: Okabe-Ito palette: distinguishable with the common colour-vision deficiencies.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
GRID = "#e3e6ea"
INK = "#23272e"
MUTED = "#6b7280"
SLO_RED = "#c0392b"

#: Default chart size in SVG user units (scaled by CSS to the page width).
WIDTH = 680
HEIGHT = 340
#: Margins leave room for tick labels (left/bottom), a legend line (top) and a right axis when there is one.
MARGIN_LEFT = 64
MARGIN_RIGHT = 20
MARGIN_RIGHT_AXIS = 56
MARGIN_TOP = 34
MARGIN_BOTTOM = 46
#: Ticks a linear axis aims for (the "nice" step makes it 4-8).
TARGET_TICKS = 5


def fmt_tick(v: float) -> str:
    """Compact tick label: 1.2k, 35, 0.25."""
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:g}M"
    if a >= 1e3:
        return f"{v / 1e3:g}k"
    if a >= 10 or v == 0:
        return f"{v:.0f}"
    return f"{v:.3g}"


def nice_ticks(lo: float, hi: float, target: int = TARGET_TICKS) -> list[float]:
    """Round-number ticks covering [lo, hi] (steps of 1, 2, 2.5 or 5 times a power of ten)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / max(target, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    ticks = []
    t = first
    while t <= hi + step * 1e-9:
        if t >= lo - step * 1e-9:
            ticks.append(round(t, 12))
        t += step
    return ticks


def log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks per decade within [lo, hi]; just the decades when the span is wide."""
    lo_e, hi_e = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    mults = (1, 2, 5) if hi_e - lo_e <= 3 else (1,)
    return [m * 10**e for e in range(lo_e, hi_e + 1) for m in mults if lo <= m * 10**e <= hi]


@dataclass
class Axis:
    lo: float
    hi: float
    log: bool = False
    #: counts (replicas, nodes): whole-number ticks only
    integer: bool = False

    def frac(self, v: float) -> float:
        if self.log:
            return (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        return (v - self.lo) / (self.hi - self.lo)

    def ticks(self) -> list[float]:
        if self.log:
            return log_ticks(self.lo, self.hi)
        ticks = nice_ticks(self.lo, self.hi)
        if self.integer:
            whole = [t for t in ticks if float(t).is_integer()]
            return whole if len(whole) >= 2 else [float(math.floor(self.lo)), float(math.ceil(self.hi))]
        return ticks


def axis_for(values: Sequence[float], *, log: bool = False, zero: bool = True, pad: float = 0.08) -> Axis:
    """An axis covering `values`, from zero when `zero` (linear) and padded a little at the top."""
    vals = [v for v in values if v is not None and math.isfinite(v) and (v > 0 or not log)]
    if not vals:
        return Axis(1.0, 10.0, log) if log else Axis(0.0, 1.0)
    lo, hi = min(vals), max(vals)
    if log:
        #: a quarter beyond the data on either side keeps end points off the frame
        return Axis(lo / 1.25, hi * 1.25, True)
    if zero:
        lo = min(0.0, lo)
    if hi == lo:
        hi = lo + (abs(lo) or 1.0)
    hi += (hi - lo) * pad
    ticks = nice_ticks(lo, hi)
    return Axis(lo, max(hi, ticks[-1]))


@dataclass
class Series:
    """One data series: a polyline (`line`), a staircase (`step`) or unconnected points (`points`)."""

    label: str
    points: list[tuple[float, float]]
    color: str = PALETTE[0]
    kind: Literal["line", "step", "points"] = "line"
    dashed: bool = False
    marker: Literal["circle", "square", "diamond", "none"] = "circle"
    #: Per-point tooltips (SVG <title>), same length as points when given.
    tips: list[str] = field(default_factory=list)


@dataclass
class RefLine:
    """A horizontal (`y`) or vertical (`x`) reference line, e.g. an SLO limit."""

    at: float
    label: str
    axis: Literal["x", "y"] = "y"
    color: str = SLO_RED


@dataclass
class Marker:
    """A highlighted point with a text label (the chosen operating point, the winner)."""

    x: float
    y: float
    label: str
    color: str = INK
    shape: Literal["star", "ring"] = "ring"
    #: Tooltip; the label is printed beside the marker only when `show_label`.
    tip: str = ""
    show_label: bool = True
    #: label of the series the marker belongs to (the curve a star is an operating point of), if any
    series: str = ""


def _num(v: float) -> str:
    """A data value as written in a data attribute: exact (repr), so a reader gets back the plotted number."""
    return repr(float(v))


def _data(**attrs: str) -> str:
    return "".join(f' data-{k}="{escape(v)}"' for k, v in attrs.items() if v)


def _marker(shape: str, x: float, y: float, color: str, tip: str = "", r: float = 3.0, data: str = "") -> str:
    """A point mark at pixel (x, y); `data`: its data attributes."""
    title = f"<title>{escape(tip)}</title>" if tip else ""
    if shape == "square":
        return (
            f'<rect class="mark" x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r:.1f}" height="{2 * r:.1f}" '
            f'fill="{color}"{data}>{title}</rect>'
        )
    if shape == "diamond":
        pts = (
            f"{x:.1f},{y - r - 1:.1f} {x + r + 1:.1f},{y:.1f} {x:.1f},{y + r + 1:.1f} {x - r - 1:.1f},{y:.1f}"
        )
        return f'<polygon class="mark" points="{pts}" fill="{color}"{data}>{title}</polygon>'
    return f'<circle class="mark" cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="{color}"{data}>{title}</circle>'


def _star(x: float, y: float, r: float) -> str:
    pts = []
    for k in range(10):
        ang = math.pi / 2 + k * math.pi / 5
        rad = r if k % 2 == 0 else r * 0.45
        pts.append(f"{x + rad * math.cos(ang):.1f},{y - rad * math.sin(ang):.1f}")
    return " ".join(pts)


def _open(chart_id: str, title: str, width: int, height: int) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
        f'aria-labelledby="{chart_id}-t" data-chart="{escape(chart_id)}" class="chart-svg">',
        f'<title id="{chart_id}-t">{escape(title)}</title>',
    ]


#: Legend geometry: height of one legend row, and the approximate width of a character at font-size 11.
LEGEND_ROW = 16
CHAR_W = 6.2


LegendItem = tuple[str, str, str]  # label, colour, style: "line" | "dashed" | "point"


def _legend_rows(items: Sequence[LegendItem], x0: float, x_max: float) -> list[list[tuple[float, int]]]:
    """Place legend entries left to right, wrapping at `x_max`: rows of (x, index)."""
    rows: list[list[tuple[float, int]]] = [[]]
    x = x0
    for i, (label, _, _) in enumerate(items):
        w = 28 + CHAR_W * len(label)
        if rows[-1] and x + w > x_max:
            rows.append([])
            x = x0
        rows[-1].append((x, i))
        x += w
    return rows if rows[0] else []


def _legend(items: Sequence[LegendItem], x0: float, x_max: float, y0: float = 16) -> list[str]:
    out = []
    for r, row in enumerate(_legend_rows(items, x0, x_max)):
        y = y0 + r * LEGEND_ROW
        for x, i in row:
            label, color, style = items[i]
            if style == "point":
                out.append(f'<rect x="{x + 4:.1f}" y="{y - 4:.1f}" width="8" height="8" fill="{color}"/>')
            else:
                dash = ' stroke-dasharray="5 3"' if style == "dashed" else ""
                out.append(
                    f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{x + 16:.1f}" y2="{y:.1f}" stroke="{color}" '
                    f'stroke-width="2.5"{dash}/>'
                )
            out.append(
                f'<text x="{x + 20:.1f}" y="{y + 4:.1f}" font-size="11" fill="{INK}">{escape(label)}</text>'
            )
    return out


@dataclass
class _Frame:
    """An x/y chart's plot area in pixels and its two axes."""

    left: float
    right: float
    top: float
    bottom: float
    xa: Axis
    ya: Axis

    def px(self, v: float) -> float:
        return self.left + self.xa.frac(v) * (self.right - self.left)

    def py(self, v: float) -> float:
        return self.bottom - self.ya.frac(v) * (self.bottom - self.top)

    def inside(self, x: float, y: float) -> bool:
        ok_y = y > 0 if self.ya.log else True
        return math.isfinite(x) and math.isfinite(y) and ok_y


def _xy_axes(fr: _Frame, height: int, x_label: str, y_label: str) -> list[str]:
    """Grid lines, tick labels, the frame and the axis titles."""
    left, right, top, bottom = fr.left, fr.right, fr.top, fr.bottom
    out = []
    for t in fr.ya.ticks():
        y = fr.py(t)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="{GRID}"/>')
        out.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end" fill="{MUTED}">{fmt_tick(t)}</text>'
        )
    for t in fr.xa.ticks():
        x = fr.px(t)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="{GRID}"/>')
        out.append(
            f'<text x="{x:.1f}" y="{bottom + 16}" font-size="11" text-anchor="middle" fill="{MUTED}">{fmt_tick(t)}</text>'
        )
    out.append(
        f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" fill="none" stroke="#c7ccd3"/>'
    )
    out.append(
        f'<text x="{(left + right) / 2:.1f}" y="{height - 8}" font-size="12" text-anchor="middle" fill="{INK}">{escape(x_label)}</text>'
    )
    out.append(
        f'<text transform="translate(14 {(top + bottom) / 2:.1f}) rotate(-90)" font-size="12" text-anchor="middle" '
        f'fill="{INK}">{escape(y_label)}</text>'
    )
    return out


def _xy_ref_lines(fr: _Frame, ref_lines: Sequence[RefLine]) -> list[str]:
    left, right, top, bottom = fr.left, fr.right, fr.top, fr.bottom
    out = []
    for r in ref_lines:
        if r.axis == "y":
            y = fr.py(r.at)
            out.append(
                f'<line class="ref" x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="{r.color}" '
                f'stroke-width="1.5" stroke-dasharray="6 4"{_data(axis="y", at=_num(r.at), label=r.label)}/>'
            )
            out.append(
                f'<text x="{right - 4}" y="{y - 5:.1f}" font-size="11" text-anchor="end" fill="{r.color}">{escape(r.label)}</text>'
            )
        else:
            x = fr.px(r.at)
            out.append(
                f'<line class="ref" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="{r.color}" '
                f'stroke-width="1.2" stroke-dasharray="2 3"{_data(axis="x", at=_num(r.at), label=r.label)}/>'
            )
            # label on the side with room: left of a line in the right half of the chart
            anchor, dx = ("end", -4) if x > (left + right) / 2 else ("start", 4)
            out.append(
                f'<text x="{x + dx:.1f}" y="{top + 12}" font-size="11" text-anchor="{anchor}" '
                f'fill="{r.color}">{escape(r.label)}</text>'
            )
    return out


def _xy_series(fr: _Frame, s: Series) -> list[str]:
    """A series' polyline (or staircase) and its point marks, clipped to the axes."""
    pts = [(fr.px(x), fr.py(y), i) for i, (x, y) in enumerate(s.points) if fr.inside(x, y)]
    if not pts:
        return []
    out = []
    dash = ' stroke-dasharray="6 4"' if s.dashed else ""
    if s.kind in ("line", "step") and len(pts) > 1:
        if s.kind == "step":
            coords = [f"{pts[0][0]:.1f},{pts[0][1]:.1f}"]
            for (_x0, y0, _), (x1, y1, _) in itertools.pairwise(pts):
                coords += [f"{x1:.1f},{y0:.1f}", f"{x1:.1f},{y1:.1f}"]
        else:
            coords = [f"{x:.1f},{y:.1f}" for x, y, _ in pts]
        xy = " ".join(f"{_num(s.points[i][0])},{_num(s.points[i][1])}" for _, _, i in pts)
        out.append(
            f'<polyline class="mark" points="{" ".join(coords)}" fill="none" stroke="{s.color}" '
            f'stroke-width="2"{dash}{_data(series=s.label, kind=s.kind, xy=xy)}/>'
        )
    if s.marker != "none":
        for x, y, i in pts:
            tip = s.tips[i] if i < len(s.tips) else f"{s.label}: {s.points[i][0]:.3g}, {s.points[i][1]:.3g}"
            data = _data(series=s.label, x=_num(s.points[i][0]), y=_num(s.points[i][1]))
            out.append(_marker(s.marker, x, y, s.color, tip, data=data))
    return out


#: A marker label's height in px (font-size 11), for keeping labels apart.
LABEL_H = 13


Box = tuple[float, float, float, float]


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _label_spot(
    fr: _Frame, x: float, y: float, text: str, placed: list[Box]
) -> tuple[float, float, str] | None:
    """Where a marker's label goes: beside it on the side with room, else above or below it, never over another
    label or outside the frame; None when every spot is taken (the marker's tooltip still names it)."""
    w = CHAR_W * len(text) + 4
    first = "end" if x > (fr.left + fr.right) / 2 else "start"
    second = "start" if first == "end" else "end"
    for anchor in (first, second):
        for dy in (-9, 17, -9 - LABEL_H, 17 + LABEL_H, -9 - 2 * LABEL_H):
            tx = x - 10 if anchor == "end" else x + 10
            left = tx - w if anchor == "end" else tx
            box = (left, y + dy - LABEL_H + 3, left + w, y + dy + 3)
            if box[0] < fr.left or box[2] > fr.right + MARGIN_RIGHT or box[1] < 0:
                continue
            if not any(_overlaps(box, b) for b in placed):
                placed.append(box)
                return tx, y + dy, anchor
    return None


def _xy_marker(fr: _Frame, m: Marker, placed: list[Box] | None = None) -> list[str]:
    """A highlighted point (star or ring) and, when shown, its label on the side with room, clear of the labels
    already `placed`."""
    if not fr.inside(m.x, m.y):
        return []
    x, y = fr.px(m.x), fr.py(m.y)
    data = _data(shape=m.shape, series=m.series, x=_num(m.x), y=_num(m.y), label=m.label)
    if m.shape == "star":
        out = [
            f'<polygon class="mark op" points="{_star(x, y, 9)}" fill="{m.color}" stroke="#fff" '
            f'stroke-width="1"{data}><title>{escape(m.tip or m.label)}</title></polygon>'
        ]
    else:
        out = [
            f'<circle class="mark op" cx="{x:.1f}" cy="{y:.1f}" r="7" fill="none" stroke="{m.color}" '
            f'stroke-width="2.5"{data}><title>{escape(m.tip or m.label)}</title></circle>'
        ]
    spot = _label_spot(fr, x, y, m.label, placed if placed is not None else []) if m.show_label else None
    if spot is not None:
        tx, ty, anchor = spot
        out.append(
            f'<text x="{tx:.1f}" y="{ty:.1f}" font-size="11" font-weight="600" text-anchor="{anchor}" '
            f'fill="{m.color}" stroke="#fff" stroke-width="3" paint-order="stroke">{escape(m.label)}</text>'
        )
    return out


def xy_chart(
    chart_id: str,
    title: str,
    *,
    x_label: str,
    y_label: str,
    series: Sequence[Series],
    ref_lines: Sequence[RefLine] = (),
    markers: Sequence[Marker] = (),
    x_axis: Axis | None = None,
    y_axis: Axis | None = None,
    y_log: bool = False,
    width: int = WIDTH,
    height: int = HEIGHT,
) -> str:
    """A line/scatter chart. Points outside the axes are clipped (a latency curve past saturation runs off the
    top rather than squashing the interesting part of the chart)."""
    xs = [p[0] for s in series for p in s.points] + [m.x for m in markers]
    ys = [p[1] for s in series for p in s.points] + [m.y for m in markers]
    xs += [r.at for r in ref_lines if r.axis == "x"]
    ys += [r.at for r in ref_lines if r.axis == "y"]
    legend: list[LegendItem] = [
        (s.label, s.color, "point" if s.kind == "points" else "dashed" if s.dashed else "line")
        for s in series
        if s.label
    ]
    extra = max(len(_legend_rows(legend, MARGIN_LEFT, width - MARGIN_RIGHT)) - 1, 0) * LEGEND_ROW
    height += extra
    fr = _Frame(
        MARGIN_LEFT,
        width - MARGIN_RIGHT,
        MARGIN_TOP + extra,
        height - MARGIN_BOTTOM,
        x_axis or axis_for(xs),
        y_axis or axis_for(ys, log=y_log),
    )
    out = _open(chart_id, title, width, height)
    clip = f"{chart_id}-clip"
    out.append(
        f'<defs><clipPath id="{clip}"><rect x="{fr.left}" y="{fr.top}" width="{fr.right - fr.left}" '
        f'height="{fr.bottom - fr.top}"/></clipPath></defs>'
    )
    out += _xy_axes(fr, height, x_label, y_label)
    out.append(f'<g clip-path="url(#{clip})">')
    out += _xy_ref_lines(fr, ref_lines)
    for s in series:
        out += _xy_series(fr, s)
    out.append("</g>")
    placed: list[Box] = []
    for m in markers:
        out += _xy_marker(fr, m, placed)
    out += _legend(legend, fr.left, fr.right)
    out.append("</svg>")
    return "".join(out)


@dataclass
class BarGroup:
    label: str
    values: list[float]
    color: str


def bar_chart(
    chart_id: str,
    title: str,
    *,
    categories: Sequence[str],
    groups: Sequence[BarGroup],
    y_label: str,
    line: Series | None = None,
    line_label: str = "",
    width: int = WIDTH,
    height: int = HEIGHT,
) -> str:
    """Grouped vertical bars per category, with an optional line on a right-hand axis (e.g. demand per hour)."""
    right_axis = line is not None
    left = MARGIN_LEFT
    right = width - (MARGIN_RIGHT_AXIS if right_axis else MARGIN_RIGHT)
    top, bottom = MARGIN_TOP, height - MARGIN_BOTTOM
    values = [v for g in groups for v in g.values]
    ya = axis_for(values)
    ya.integer = all(float(v).is_integer() for v in values)
    out = _open(chart_id, title, width, height)
    for t in ya.ticks():
        y = bottom - ya.frac(t) * (bottom - top)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="{GRID}"/>')
        out.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end" fill="{MUTED}">{fmt_tick(t)}</text>'
        )
    n = max(len(categories), 1)
    slot = (right - left) / n
    bar_w = slot * 0.8 / max(len(groups), 1)
    for i, cat in enumerate(categories):
        x0 = left + i * slot + slot * 0.1
        for j, g in enumerate(groups):
            v = g.values[i]
            h = ya.frac(v) * (bottom - top)
            out.append(
                f'<rect class="mark" x="{x0 + j * bar_w:.1f}" y="{bottom - h:.1f}" width="{bar_w * 0.92:.1f}" '
                f'height="{max(h, 0):.1f}" fill="{g.color}"><title>{escape(cat)}: {escape(g.label)} {v:g}</title></rect>'
            )
        if n <= 24 or i % 2 == 0:
            out.append(
                f'<text x="{left + (i + 0.5) * slot:.1f}" y="{bottom + 15}" font-size="10" text-anchor="middle" '
                f'fill="{MUTED}">{escape(cat)}</text>'
            )
    out.append(f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#c7ccd3"/>')
    out.append(
        f'<text transform="translate(14 {(top + bottom) / 2:.1f}) rotate(-90)" font-size="12" text-anchor="middle" '
        f'fill="{INK}">{escape(y_label)}</text>'
    )
    legend: list[LegendItem] = [(g.label, g.color, "point") for g in groups]
    if line is not None:
        la = axis_for([p[1] for p in line.points])
        coords = []
        for x, y in line.points:
            cx = left + (x + 0.5) * slot
            cy = bottom - la.frac(y) * (bottom - top)
            coords.append(f"{cx:.1f},{cy:.1f}")
        out.append(
            f'<polyline class="mark" points="{" ".join(coords)}" fill="none" stroke="{line.color}" stroke-width="2"/>'
        )
        for t in la.ticks():
            y = bottom - la.frac(t) * (bottom - top)
            out.append(
                f'<text x="{right + 6}" y="{y + 4:.1f}" font-size="11" fill="{line.color}">{fmt_tick(t)}</text>'
            )
        out.append(
            f'<text transform="translate({width - 8} {(top + bottom) / 2:.1f}) rotate(90)" font-size="12" '
            f'text-anchor="middle" fill="{line.color}">{escape(line_label)}</text>'
        )
        legend.append((line.label, line.color, "line"))
    out += _legend(legend, left, right)
    out.append("</svg>")
    return "".join(out)


def hbar_chart(
    chart_id: str,
    title: str,
    *,
    rows: Sequence[tuple[str, float, str]],
    value_fmt: str = "${:,.0f}",
    width: int = WIDTH,
    row_height: int = 26,
) -> str:
    """One horizontal bar per row (label, value, colour), the value printed at the bar's end."""
    label_w = 230
    height = MARGIN_TOP // 2 + row_height * len(rows) + 16
    left, right = label_w, width - 110
    top = MARGIN_TOP // 2
    vmax = max((v for _, v, _ in rows), default=1.0) or 1.0
    out = _open(chart_id, title, width, height)
    for i, (label, v, color) in enumerate(rows):
        y = top + i * row_height
        w = (right - left) * max(v, 0) / vmax
        out.append(
            f'<text x="{left - 8}" y="{y + row_height * 0.62:.1f}" font-size="12" text-anchor="end" fill="{INK}">'
            f"{escape(label)}</text>"
        )
        out.append(
            f'<rect class="mark" x="{left}" y="{y + 3}" width="{w:.1f}" height="{row_height - 8}" fill="{color}">'
            f"<title>{escape(label)}: {escape(value_fmt.format(v))}</title></rect>"
        )
        out.append(
            f'<text x="{left + w + 6:.1f}" y="{y + row_height * 0.62:.1f}" font-size="12" fill="{INK}">'
            f"{escape(value_fmt.format(v))}</text>"
        )
    out.append("</svg>")
    return "".join(out)
