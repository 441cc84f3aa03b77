"""`sizing serve [--port 3000]`: the HTTP API on localhost, backed by an embedded AWS.

The command and its machinery (moto, the HTTP ↔ API Gateway adapter, the local runs) live in the local stack,
`sizing_local.serve`, which the Lambda layer does not ship; this module only registers the command."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from sizing_local.serve import register as register_local

    register_local(sub)
