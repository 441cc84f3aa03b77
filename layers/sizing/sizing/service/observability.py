"""Logger, tracer and metrics, created once for every handler (Powertools reads service name, namespace and log
level from the environment set in template.yaml)."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

logger = Logger()
tracer = Tracer()
metrics = Metrics()
