"""A browser shows the report as a page with content, not a blank screen: headless Chromium renders it to PNG and
the screenshot has the dark header, white panels and coloured chart ink a person would see."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from sizing.plan import estimate
from sizing.report import write_report
from sizing.workload.parse import load_spec

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "chatbot.yaml"
#: Flags for a quiet, sandbox-free, offline headless run (the notes on this machine's Chromium).
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
]
#: Tall enough to take in the answer, the workload, the ranking and the first latency chart.
WINDOW = "1280,2400"
#: Chromium's first start on a cold machine can take a while; a hung browser must not hang the suite.
TIMEOUT_S = 120

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Chromium is not installed"),
]


def _pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA PNG into rows of raw pixel bytes (enough for a screenshot; no library)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", data[:10])
            assert depth == 8 and color in (2, 6), (
                f"unexpected PNG format: depth {depth}, colour type {color}"
            )
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += data
    raw, stride, rows, prev = zlib.decompress(idat), width * channels, [], bytearray(width * channels)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, channels, rows


def test_the_report_renders_in_a_browser_as_a_page_with_content(tmp_path: Path) -> None:
    # given
    page = write_report(estimate(load_spec(EXAMPLE)).document(), tmp_path / "report.html")
    shot = tmp_path / "report.png"
    # when
    subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={WINDOW}",
         f"--screenshot={shot}", page.as_uri()],
        check=True, capture_output=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    # then: many colours (text, charts), the dark header at the top, and ink well below the fold
    width, channels, rows = _pixels(shot.read_bytes())
    colours = {row[i : i + 3] for row in rows[::8] for i in range(0, width * channels, channels * 8)}
    assert len(colours) > 50, f"only {len(colours)} colours: the page looks blank"
    header = rows[20][: 3 * channels : channels]
    assert max(header) < 80, "the dark page header is missing"
    lower = rows[len(rows) // 2 :: 4]
    below = {row[i : i + 3] for row in lower for i in range(0, width * channels, channels * 4)}
    assert len(below) > 10, "nothing in the lower half of the page"
