"""A seeded queue simulator: requests arriving at random (Poisson) to c servers, each request served in a random
time (exponential, or lognormal), first come first served (M/G/c); or Locust's closed model (Users). It gives
what a Locust master records of a stage: each second's latencies (by the second a request completed, as HDR bucket
tops in ns) and failures, so that the verdict code runs on synthetic stages at a chosen utilisation, fast, instead
of on real waiting."""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass

from loadstage.results import histograms
from loadstage.results.intervals import Block, as_histogram


def bucket_top_ns(ns: float) -> int:
    """The top of the HDR bucket (3 significant digits) a latency falls in."""
    value = max(1, int(ns))
    magnitude = max(0, len(str(value)) - 3)
    step = 10 ** magnitude
    return -(-value // step) * step


def recorded_seconds(blocks: list[Block]) -> list[list]:
    """Simulated seconds as a Locust master keeps them (loadstage.locust.recorder): [encoded histogram, mean ns,
    requests, failures] each."""
    out = []
    for block in blocks:
        histogram = as_histogram(block.counts)
        out.append([histograms.encode(histogram), histograms.mean_ns(histogram), histogram.get_total_count(),
                    block.failures])
    return out


@dataclass(frozen=True)
class Queue:
    servers: int
    service_ms: float          # the mean service time
    utilisation: float         # arrival rate x service time / servers
    lognormal_sigma: float = 0.0   # 0: exponential service times
    paced: bool = False            # arrivals every 1/rate seconds (loadstage's arrivalRate), not Poisson

    @property
    def rate(self) -> float:
        """Arrivals a second."""
        return self.utilisation * self.servers * 1000 / self.service_ms

    def stage(self, seconds: float, seed: int, failure_rate: float = 0.0) -> list[Block]:
        """One stage from an empty queue: each second's completed requests, as Blocks of one second."""
        rng = random.Random(seed)
        free = [0.0] * self.servers
        heapq.heapify(free)
        per_second: list[dict[int, int]] = [{} for _ in range(math.ceil(seconds))]
        failures = [0] * len(per_second)
        at = 0.0
        while True:
            at += 1 / self.rate if self.paced else rng.expovariate(self.rate)
            if at >= seconds:
                break
            start = max(at, heapq.heappop(free))
            done = start + self._service(rng)
            heapq.heappush(free, done)
            if done >= seconds:
                continue   # still in flight when the stage ends
            second = int(done)
            value = bucket_top_ns((done - at) * 1e9)
            per_second[second][value] = per_second[second].get(value, 0) + 1
            if failure_rate and rng.random() < failure_rate:
                failures[second] += 1
        return [Block(counts, failed, 1.0) for counts, failed in zip(per_second, failures)]

    def _service(self, rng: random.Random) -> float:
        mean = self.service_ms / 1000
        if not self.lognormal_sigma:
            return rng.expovariate(1 / mean)
        mu = math.log(mean) - self.lognormal_sigma ** 2 / 2
        return rng.lognormvariate(mu, self.lognormal_sigma)


def true_percentile_ms(queue: Queue, quantile: float) -> float:
    """The queue's percentile of latency in its steady state, exactly (M/M/c: Poisson arrivals, exponential
    service): a request waits with the Erlang C probability, then for an exponential time of rate c mu - lambda,
    and is served for an exponential time of rate mu; the tail of their sum, solved by bisection."""
    assert not queue.lognormal_sigma and not queue.paced, "exact for M/M/c only"
    mu = 1000 / queue.service_ms
    arrivals, c = queue.rate, queue.servers
    theta, offered = c * mu - arrivals, arrivals / mu
    below = sum(offered ** k / math.factorial(k) for k in range(c))
    top = offered ** c / math.factorial(c) * c / (c - offered)
    waits = top / (below + top)

    def tail(t: float) -> float:
        both = (theta * math.exp(-mu * t) - mu * math.exp(-theta * t)) / (theta - mu) if abs(theta - mu) > 1e-9 \
            else (1 + mu * t) * math.exp(-mu * t)
        return (1 - waits) * math.exp(-mu * t) + waits * both
    low, high = 0.0, 3600.0
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if tail(middle) > 1 - quantile else (low, middle)
    return high * 1000


@dataclass(frozen=True)
class Users:
    """Locust's closed model: `users` each wait an exponential think time, send a request and wait for its answer,
    to the same c servers (FCFS, exponential service). A queue here is bounded by the users, as with Locust's
    users: the model loadstage's `users` stages run."""
    users: int
    think_ms: float
    servers: int
    service_ms: float

    def stage(self, seconds: float, seed: int, failure_rate: float = 0.0) -> list[Block]:
        """One stage from an empty queue, its users spawned over the first second: each second's completed
        requests, as Blocks of one second."""
        rng = random.Random(seed)
        free = [0.0] * self.servers
        due = [(rng.uniform(0.0, 1.0), user) for user in range(self.users)]
        heapq.heapify(due)
        per_second: list[dict[int, int]] = [{} for _ in range(math.ceil(seconds))]
        failures = [0] * len(per_second)
        while due:
            at, user = heapq.heappop(due)
            if at >= seconds:
                continue
            start = max(at, heapq.heappop(free))
            done = start + rng.expovariate(1000 / self.service_ms)
            heapq.heappush(free, done)
            if done >= seconds:
                continue
            second = int(done)
            value = bucket_top_ns((done - at) * 1e9)
            per_second[second][value] = per_second[second].get(value, 0) + 1
            if failure_rate and rng.random() < failure_rate:
                failures[second] += 1
            heapq.heappush(due, (done + rng.expovariate(1000 / self.think_ms), user))
        return [Block(counts, failed, 1.0) for counts, failed in zip(per_second, failures)]

    def utilisation(self) -> float:
        """The servers' busy share in the steady state (from the queue-length distribution of seen_by)."""
        population = self._seen_by(self.users)
        return sum(p * min(k, self.servers) for k, p in enumerate(population)) / self.servers

    def _seen_by(self, population: int) -> list[float]:
        """The stationary distribution of requests at the servers with `population` users (a birth-death chain:
        (population - k) / think in, min(k, c) / service out)."""
        weights = [1.0]
        for k in range(population):
            weights.append(weights[-1] * (population - k) / self.think_ms * self.service_ms / min(k + 1, self.servers))
        total = sum(weights)
        return [w / total for w in weights]


def _poisson_below(m: int, mean: float) -> float:
    """P(Poisson(mean) < m)."""
    term, total = math.exp(-mean), 0.0
    for j in range(m):
        total += term
        term *= mean / (j + 1)
    return total


def true_percentile_ms_closed(model: Users, quantile: float) -> float:
    """The closed model's percentile of latency in its steady state, exactly: a request finds the queue as it is
    with the other users alone (the arrival theorem); finding k >= c it waits an Erlang(k - c + 1, c mu) time,
    then is served for an exponential time of rate mu. The tail of that mixture, solved by bisection."""
    mu, c = 1000 / model.service_ms, model.servers
    found = model._seen_by(model.users - 1)

    def tail(t: float) -> float:
        total = sum(found[:c]) * math.exp(-mu * t)
        for k in range(c, len(found)):
            m, rate = k - c + 1, c * mu
            waited = 1 - _poisson_below(m, rate * t)           # P(Erlang(m, rate) <= t)
            gamma_below = 1 - _poisson_below(m, (rate - mu) * t)   # P(Erlang(m, rate - mu) <= t)
            total += found[k] * ((1 - waited) + math.exp(-mu * t) * (rate / (rate - mu)) ** m * gamma_below)
        return total
    low, high = 0.0, 3600.0
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if tail(middle) > 1 - quantile else (low, middle)
    return high * 1000
