"""Reports of estimates and runs: a self-contained HTML page (inline SVG charts), CSV and JSON exports, and
storage of the page in S3 with a presigned link."""

from sizing.report.export import export_csv, rejected_csv, write_exports
from sizing.report.page import render_report, write_report

__all__ = ["export_csv", "rejected_csv", "render_report", "write_exports", "write_report"]
