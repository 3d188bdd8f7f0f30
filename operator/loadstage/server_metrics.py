"""The target's own count of served requests, read from its Prometheus /metrics."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

REQUEST_METRIC = "runner_request_duration_seconds"


def served_requests(metrics_text: str) -> int:
    """Requests the app served on instrumented routes (health and metrics routes excluded)."""
    total = 0.0
    for family in text_string_to_metric_families(metrics_text):
        if family.name == REQUEST_METRIC:
            total += sum(s.value for s in family.samples if s.name == f"{REQUEST_METRIC}_count")
    return int(total)


def scrape_served_requests(base_urls: list[str], timeout: float = 5.0) -> int | None:
    """Sum over every instance; None if any instance cannot be read."""
    total = 0
    for url in base_urls:
        try:
            with urllib.request.urlopen(f"{url}/metrics", timeout=timeout) as response:
                total += served_requests(response.read().decode())
        except OSError:
            return None
    return total
