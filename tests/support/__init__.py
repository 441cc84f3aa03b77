"""Helpers the tests share that are not test doubles (those live in tests/fakes)."""
