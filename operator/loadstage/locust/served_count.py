"""The target's own count of served requests, read from its Prometheus /metrics.

The Locust master reads it from every target instance when a stage starts and when it ends. A URL
whose host resolves to several addresses (a headless Service) stands for one instance per address."""

from __future__ import annotations

import socket
import urllib.parse
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


def instance_urls(url: str) -> list[str]:
    """One URL per address the URL's host resolves to."""
    parts = urllib.parse.urlsplit(url)
    port = parts.port or 80
    addresses = sorted({info[4][0] for info in socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)})
    return [urllib.parse.urlunsplit(parts._replace(netloc=f"[{a}]:{port}" if ":" in a else f"{a}:{port}"))
            for a in addresses]


def scrape_served_requests(metrics_urls: list[str], timeout: float = 5.0) -> dict[str, int] | None:
    """Served requests by instance URL; None if any instance cannot be read."""
    counts = {}
    try:
        for url in metrics_urls:
            for instance in instance_urls(url):
                with urllib.request.urlopen(instance, timeout=timeout) as response:
                    counts[instance] = served_requests(response.read().decode())
    except (OSError, ValueError):
        return None
    return counts


def served_between(before: dict[str, int] | None, after: dict[str, int] | None) -> int | None:
    """Requests served between two readings of the same instances; None if they are not comparable
    (an instance could not be read, or the set of instances changed)."""
    if before is None or after is None or before.keys() != after.keys():
        return None
    return sum(after[i] - before[i] for i in after)
