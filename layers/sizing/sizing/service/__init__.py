"""Services between the transports (HTTP API, Slack, events) and the domain: each exposes the few operations a
transport needs (create a run and start its execution, cancel it, ...) and raises domain errors only."""
