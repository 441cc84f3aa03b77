"""Request traces as a workload: read Mooncake JSONL, Bedrock model-invocation logs, SageMaker Data Capture and
plain CSV (`reader`, `formats`), say what they hold (`summary`), and generate samples of each (`samples`).
Only counts, times and hashes computed here are kept: no prompt or answer text (docs/traces.md)."""

from sizing.traces.formats import FORMATS, TraceFormat
from sizing.traces.reader import Trace, read_trace
from sizing.traces.summary import summarize

__all__ = ["FORMATS", "Trace", "TraceFormat", "read_trace", "summarize"]
