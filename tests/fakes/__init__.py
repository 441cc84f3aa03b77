"""Test doubles shared by the suite (and the benchmarks): an in-memory store, Step Functions and Slack
stand-ins, and a fake Kubernetes API. None of them ships in the Lambda layer."""
