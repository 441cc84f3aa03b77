"""The local stack: what `sizing run` and `sizing serve` need to run the product on one machine with no AWS
account, and what the Lambda layer does not ship (template.yaml's layer is built from layers/sizing/ only).

- `sizing_local.stack`: moto as the embedded AWS (its server in this process), the template's table, bus,
  step functions and state machine deployed on it, Lambda `Invoke` dispatched in-process to the handlers.
- `sizing_local.twins`: candidates provisioned as local twins (`sizing twin` child processes on loopback).
- `sizing_local.serve`: `sizing serve`, the HTTP API on localhost backed by the embedded AWS.
"""
