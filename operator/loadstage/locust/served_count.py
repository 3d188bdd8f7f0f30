"""The target's own count of served requests, read from its Prometheus metrics: a counter, or the count of
a histogram or summary (the runner app's is runner_request_duration_seconds).

The Locust master reads it from every target instance when a stage starts and when it ends. A URL
whose host resolves to several addresses (a headless Service) stands for one instance per address."""

from __future__ import annotations

import socket
import urllib.parse
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

REQUEST_METRIC = "runner_request_duration_seconds"


def served_requests(metrics_text: str, counter: str = REQUEST_METRIC) -> int | None:
    """What `counter` counts, summed over its labels; None if the metrics have no such family. A counter
    may be named with or without its _total; a histogram or summary counts its observations."""
    name = counter.removesuffix("_total")
    found = [f for f in text_string_to_metric_families(metrics_text) if f.name == name]
    if not found:
        return None
    wanted = {f"{name}_total", f"{name}_count"} if found[0].type in ("counter", "histogram", "summary") else {name}
    return int(sum(s.value for f in found for s in f.samples if s.name in wanted))


def instance_urls(url: str) -> list[str]:
    """One URL per address the URL's host resolves to."""
    parts = urllib.parse.urlsplit(url)
    port = parts.port or 80
    addresses = sorted({str(info[4][0]) for info in socket.getaddrinfo(parts.hostname, port,
                                                                      type=socket.SOCK_STREAM)})
    return [urllib.parse.urlunsplit(parts._replace(netloc=f"[{a}]:{port}" if ":" in a else f"{a}:{port}"))
            for a in addresses]


def scrape_served_requests(metrics_urls: list[str], counter: str = REQUEST_METRIC,
                           timeout: float = 5.0) -> dict[str, int | None] | None:
    """Served requests by instance URL (None for an instance without the counter: it may have counted
    nothing yet); None if any instance cannot be read."""
    counts = {}
    try:
        for url in metrics_urls:
            for instance in instance_urls(url):
                with urllib.request.urlopen(instance, timeout=timeout) as response:
                    counts[instance] = served_requests(response.read().decode(), counter)
    except (OSError, ValueError):
        return None
    return counts


def served_between(before: dict[str, int | None] | None, after: dict[str, int | None] | None) -> int | None:
    """Requests served between two readings of the same instances; None if they are not comparable (an
    instance could not be read, the set of instances changed, or a count went back: the process restarted and
    what it served before is lost) or no instance has the counter even at the end (the app does not count
    that way). A counter with labels appears with its first request: absent before, it counted 0."""
    if before is None or after is None or before.keys() != after.keys():
        return None
    if all(count is None for count in after.values()):
        return None
    served = {i: (after[i] or 0) - (before[i] or 0) for i in after}
    return None if any(n < 0 for n in served.values()) else sum(served.values())
