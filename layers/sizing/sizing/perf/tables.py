"""The cross-validation's error tables as text (`sizing calibrate`, `benchmarks/accuracy.py`)."""

from __future__ import annotations

from typing import Any

from sizing.base.text import table as render

CV_TITLES = {
    "source": "Leave-one-source-out",
    "study": "Leave-one-study-out (stricter: every source of a lab or repository held out together)",
}


def format_error_table(table: dict[str, Any]) -> str:
    """The error tables as text: per metric, then per family, calibrated beside plain roofline."""

    def line(name: str, s: dict[str, Any]) -> list[Any]:
        if not s.get("n"):
            return [name, 0, "", "", "", ""]
        return [
            name,
            s["n"],
            f"{s['mdape']:.0%}",
            f"{s['within_25']:.0%}",
            f"{s['roofline_mdape']:.0%}",
            f"{s['roofline_within_25']:.0%}",
        ]

    head = ["", "n", "MdAPE", "within 25%", "roofline MdAPE", "roofline within 25%"]
    parts = [f"{CV_TITLES[table.get('grouping', 'source')]} error by metric:"]
    parts.append(
        render(head, [line(k, v) for k, v in table["by_metric"].items()] + [line("all", table["overall"])])
    )
    parts.append("")
    parts.append("By accelerator family (all metrics; then TTFT / TPOT / saturated throughput MdAPE):")
    rows = []
    for fam, d in table["by_family"].items():
        extra = " / ".join(
            f"{d[m]['mdape']:.0%}" if m in d else "-" for m in ("ttft", "tpot", "saturated_throughput")
        )
        rows.append([*line(fam, d["all"]), extra])
    parts.append(render([*head, "TTFT / TPOT / sat. thr."], rows))
    return "\n".join(parts)
