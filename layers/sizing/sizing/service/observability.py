"""Logger, tracer and metrics, created once for every handler (Powertools reads service name, namespace and log
level from the environment set in template.yaml)."""

from __future__ import annotations

import logging

from aws_lambda_powertools import Logger, Metrics, Tracer

logger = Logger()
tracer = Tracer()
metrics = Metrics()

#: botocore writes whole response bodies at DEBUG (a GetSecretValue answer with its SecretString: a Slack token,
#: a Hugging Face token) and whole request bodies (a secret being written). Whatever level a function's logs are
#: turned to, these loggers stop at INFO.
SECRET_BEARING_LOGGERS = ("botocore.parsers", "botocore.endpoint")
for _name in SECRET_BEARING_LOGGERS:
    logging.getLogger(_name).setLevel(logging.INFO)
