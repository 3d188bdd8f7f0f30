"""Helpers for the tests and benchmarks: clusters, processes, browsers and waits."""
