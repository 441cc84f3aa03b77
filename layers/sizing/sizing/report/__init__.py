"""Reports of estimates and runs: a self-contained HTML page (inline SVG charts), CSV and JSON exports, and
storage of the page in S3 with a presigned link."""

from sizing.report.export import export_csv, rejected_csv, write_exports
from sizing.report.page import render_report, write_report
from sizing.report.run import render_run_report, run_result, write_run_report

__all__ = [
    "export_csv",
    "rejected_csv",
    "render_report",
    "render_run_report",
    "run_result",
    "write_exports",
    "write_report",
    "write_run_report",
]
