"""Read a rendered report back: its tagged figures, its charts, its embedded result and any structural fault.

Used by the tests (and useful to anyone checking a stored report, e.g. the API's report route): "the page says
what the JSON says" becomes a comparison of `figures` against the result, and "every chart is there" a look at
`charts`."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

#: HTML elements that never have a closing tag.
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
#: Attributes through which a page loads something; their values must be in-page (#...) or data: URIs.
LOADING_ATTRS = {"src", "href", "xlink:href", "srcset", "poster", "data"}
SVG_NS = "{http://www.w3.org/2000/svg}"


@dataclass
class Figure:
    path: str
    value: float
    text: str
    #: the text shows value x scale (a fraction shown as a percentage: 100)
    scale: float = 1.0


@dataclass
class ReportView:
    figures: list[Figure] = field(default_factory=list)
    #: chart name -> number of data marks (lines, points, bars) in its SVG
    charts: dict[str, int] = field(default_factory=dict)
    #: ids of the page's sections, in order
    sections: list[str] = field(default_factory=list)
    result: dict[str, Any] | None = None
    #: references to anything outside the page (http:, //host, file paths ...)
    external: list[str] = field(default_factory=list)
    #: unbalanced or misnested tags, malformed SVG
    faults: list[str] = field(default_factory=list)


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.view = ReportView()
        self.stack: list[str] = []
        self._fig: tuple[str, float, int, float] | None = None  # path, value, depth, scale
        self._text: list[str] = []
        self._script_json = False
        self._json: list[str] = []

    def _attrs(self, attrs: list[tuple[str, str | None]]) -> dict[str, str]:
        return {k: v or "" for k, v in attrs}

    def _check_refs(self, tag: str, a: dict[str, str]) -> None:
        for k, v in a.items():
            if k in LOADING_ATTRS and v and not (v.startswith("#") or v.startswith("data:")):
                self.view.external.append(f"<{tag} {k}={v}>")
            if k == "style" and "url(" in v and "url(#" not in v:
                self.view.external.append(f"<{tag} style={v}>")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = self._attrs(attrs)
        self._check_refs(tag, a)
        if tag == "section" and a.get("id"):
            self.view.sections.append(a["id"])
        if tag == "script":
            if a.get("src"):
                self.view.external.append(f"<script src={a['src']}>")
            self._script_json = a.get("type") == "application/json" and a.get("id") == "sizing-result"
        if tag == "link":
            self.view.external.append(f"<link href={a.get('href', '')}>")
        if "data-path" in a and "data-value" in a:
            self._fig = (
                a["data-path"],
                float(a["data-value"]),
                len(self.stack),
                float(a.get("data-scale") or 1),
            )
            self._text = []
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._check_refs(tag, self._attrs(attrs))

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.view.faults.append(f"</{tag}> closes <{self.stack[-1] if self.stack else 'nothing'}>")
            if tag in self.stack:
                while self.stack and self.stack.pop() != tag:
                    pass
            return
        self.stack.pop()
        if tag == "script":
            self._script_json = False
        if self._fig is not None and len(self.stack) == self._fig[2]:
            path, value, _, scale = self._fig
            self.view.figures.append(Figure(path, value, "".join(self._text).strip(), scale))
            self._fig = None

    def handle_data(self, data: str) -> None:
        if self._fig is not None:
            self._text.append(data)
        if self._script_json:
            self._json.append(data)

    def close(self) -> None:
        super().close()
        if self.stack:
            self.view.faults.append(f"unclosed: {self.stack}")
        if self._json:
            self.view.result = json.loads("".join(self._json))


_SVG = re.compile(r"<svg\b.*?</svg>", re.S)


def _charts(html: str, view: ReportView) -> None:
    for m in _SVG.finditer(html):
        try:
            root = ET.fromstring(m.group(0))
        except ET.ParseError as exc:
            view.faults.append(f"SVG is not well-formed XML: {exc}")
            continue
        name = root.get("data-chart") or f"svg-{len(view.charts)}"
        marks = [el for el in root.iter() if "mark" in (el.get("class") or "").split()]
        view.charts[name] = len(marks)


def read_report(html: str) -> ReportView:
    """Parse a report page: figures, charts, sections, the embedded result, and faults."""
    r = _Reader()
    r.feed(html)
    r.close()
    _charts(html, r.view)
    return r.view


_NUMBER = re.compile(r"-?[\d,]*\.?\d+")


def shown_number(text: str) -> tuple[float, float] | None:
    """The number a figure's text shows and the rounding it was shown with: "$52,342" -> (52342, 0.5)."""
    m = _NUMBER.search(text)
    if not m:
        return None
    digits = m.group(0).replace(",", "")
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    return float(digits), 0.5 * 10.0**-decimals


@dataclass
class MarkerGeometry:
    """A highlighted point (the operating point's star, another architecture's ring), in the chart's units."""

    shape: str
    x: float
    y: float
    label: str = ""
    #: the series (curve) it belongs to; '' when it names none
    series: str = ""
    #: where it is drawn, in SVG user units (the star's centre, the ring's)
    px: tuple[float, float] | None = None


@dataclass
class ChartGeometry:
    """What a chart draws, in its own units, read from the data attributes of its marks."""

    #: series label -> its points (x, y) in the order drawn
    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    markers: list[MarkerGeometry] = field(default_factory=list)
    #: reference lines: (axis, at, label); axis "x" is a vertical line at x = at
    refs: list[tuple[str, float, str]] = field(default_factory=list)


def _centre(el: ET.Element) -> tuple[float, float] | None:
    if el.get("cx") is not None:
        return float(el.get("cx") or 0), float(el.get("cy") or 0)
    pts = [tuple(map(float, p.split(","))) for p in (el.get("points") or "").split()]
    if not pts:
        return None
    # a star's vertices are symmetric about its centre: their mean is the centre
    return sum(p[0] for p in pts) / len(pts), sum(p[1] for p in pts) / len(pts)


def chart_geometry(html: str) -> dict[str, ChartGeometry]:
    """Every chart's series, markers and reference lines by chart name, from the data the page plotted."""
    out: dict[str, ChartGeometry] = {}
    for m in _SVG.finditer(html):
        try:
            root = ET.fromstring(m.group(0))
        except ET.ParseError:
            continue
        geo = ChartGeometry()
        # a line's points are its polyline's; a series of unconnected points is read point by point
        lines = {el.get("data-series") or "" for el in root.iter() if el.get("data-xy")}
        for el in root.iter():
            classes = (el.get("class") or "").split()
            if "ref" in classes and el.get("data-at") is not None:
                geo.refs.append(
                    (el.get("data-axis") or "", float(el.get("data-at") or 0), el.get("data-label") or "")
                )
            elif "op" in classes and el.get("data-x") is not None:
                geo.markers.append(
                    MarkerGeometry(
                        el.get("data-shape") or "",
                        float(el.get("data-x") or 0),
                        float(el.get("data-y") or 0),
                        el.get("data-label") or "",
                        el.get("data-series") or "",
                        _centre(el),
                    )
                )
            elif "mark" in classes and el.get("data-xy"):
                pts = [tuple(map(float, p.split(","))) for p in (el.get("data-xy") or "").split()]
                geo.series[el.get("data-series") or ""] = [(p[0], p[1]) for p in pts]
            elif (
                "mark" in classes
                and el.get("data-x") is not None
                and (el.get("data-series") or "") not in lines
            ):
                geo.series.setdefault(el.get("data-series") or "", []).append(
                    (float(el.get("data-x") or 0), float(el.get("data-y") or 0))
                )
        out[root.get("data-chart") or f"svg-{len(out)}"] = geo
    return out
