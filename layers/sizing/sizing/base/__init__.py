"""The base layer every feature stands on, importing nothing above it (tests/unit/test_import_graph.py holds
it): errors and their user-facing problems, the product's vocabulary, token-length distributions and token
counting, observability, the wiring of a feature's settings and clients, environment settings, the shared AWS
adapters, the serving configuration, the lifeline of child processes, plain-text presentation and the models'
bases (strict, frozen, lenient, open). Nothing is imported here: each module is imported by its own name."""
