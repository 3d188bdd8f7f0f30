"""The target during a stage, as the status holds it (status.variants[].stages[].target): its resources, its own
count of requests, and its pods' health; each type beside its declaration."""

from __future__ import annotations

from dataclasses import dataclass

from loadstage.api.schema import Field, Int, ListOf, Num, Obj, Pair, Str, Written, omit_none


@dataclass(frozen=True)
class TargetPodHealth(Written):
    """A target pod that restarted, was taken away, or was out of its Service (not ready) during a stage."""
    pod: str
    restarts: int
    unready_seconds: float
    causes: tuple[str, ...] = ()    # of its restarts: how the container ended, what the kubelet said
    gone: str | None = None         # how it was taken away

    def describe(self) -> str:
        """'runner-abc: 2 restart(s), Error (exit 137), Liveness probe failed: ..., 12 s unready'."""
        said = [f"{self.restarts} restart(s)" if self.restarts else "", *self.causes, self.gone or "",
                f"{self.unready_seconds:g} s unready" if self.unready_seconds else ""]
        return f"{self.pod}: " + ", ".join(s for s in said if s)

    @property
    def interrupted(self) -> bool:
        """Its processes did not serve the whole stage."""
        return self.restarts > 0 or self.gone is not None


POD_HEALTH = Obj(TargetPodHealth, "A target pod that restarted, was taken away or was unready during the stage.", {
    "pod": Str("The pod's name."),
    "restarts": Field(Int("Its containers' restarts during the stage."), absent=0),
    "unreadySeconds": Field(Num("Seconds it was not ready (out of its Service)."), absent=0.0),
    "causes": Field(ListOf("Of its restarts: how the container ended, what the kubelet said.",
                           Str("A cause.")), absent=()),
    "gone": Field(Str("How it was taken away (evicted, deleted).", nullable=True), omit=omit_none),
}, required=("pod",))


@dataclass(frozen=True)
class TargetFigures(Written):
    peak_cpu_cores: float | None = None
    peak_memory_bytes: int | None = None
    served_requests: int | None = None     # the target's own count of the stage's requests
    pods: tuple[TargetPodHealth, ...] | None = None     # None: the target's health was not watched (local)
    processes: int | None = None           # the most processes one pod had at once (local)
    peak_process_rss_bytes: int | None = None   # the largest resident set of one process (local)
    proxy_peak_cpu_cores: float | None = None   # the front proxies (spec.target.proxy), apart from the above
    proxy_peak_memory_bytes: int | None = None
    mean_cpu_cores: float | None = None    # over the stage's settled seconds
    mean_cpu_interval: tuple[float, float] | None = None

    @property
    def cpu_cores(self) -> float | None:
        """The CPU it used: its mean over the settled seconds where measured, else its peak."""
        return self.mean_cpu_cores if self.mean_cpu_cores is not None else self.peak_cpu_cores

    @property
    def restarts(self) -> int | None:
        return None if self.pods is None else sum(p.restarts for p in self.pods)

    @property
    def unready_seconds(self) -> float | None:
        return None if self.pods is None else round(sum(p.unready_seconds for p in self.pods), 1)

    def unsteady(self) -> str | None:
        """Why the stage did not load a steady target, e.g. '2 restart(s), 4.8 s unready'; None if it did."""
        if not self.pods:
            return None
        gone = sum(1 for p in self.pods if p.gone)
        said = [f"{self.restarts} restart(s)" if self.restarts else "",
                f"{gone} pod(s) taken away" if gone else "",
                f"{self.unready_seconds:g} s unready" if self.unready_seconds else ""]
        return ", ".join(s for s in said if s)


def _unwatched(value: object, target: TargetFigures) -> bool:
    return target.pods is None


def _no_processes(value: object, target: TargetFigures) -> bool:
    return target.processes is None


def _no_proxy(value: object, target: TargetFigures) -> bool:
    return target.proxy_peak_cpu_cores is None and target.proxy_peak_memory_bytes is None


TARGET = Obj(TargetFigures, "The target during the stage: its resources, its own count of requests, its health.", {
    "peakCpuCores": Num("The target's peak CPU, cores (all its pods; sampled every second).", nullable=True),
    "peakMemoryBytes": Int("The target's peak memory, bytes (all its pods).", nullable=True),
    "meanCpuCores": Field(Num("The target's mean CPU over the stage's settled seconds, cores (all its pods; "
                              "locally read every half second, in a cluster metrics-server's windows).",
                              nullable=True), omit=omit_none),
    "meanCpuInterval": Field(Pair("Its 95% interval: a t-interval over 10 batches of the readings.", nullable=True),
                             omit=omit_none),
    "servedRequests": Int("Requests the target itself counted (its /metrics), to check Locust's count.",
                          nullable=True),
    "processes": Field(Int("Locally: the most processes one target had at once.", nullable=True),
                       omit=_no_processes),
    "peakProcessRssBytes": Field(Int("Locally: the largest resident set of one of its processes, bytes.",
                                     nullable=True), omit=_no_processes),
    "proxyPeakCpuCores": Field(Num("The front proxies' peak CPU, cores (spec.target.proxy).", nullable=True),
                               omit=_no_proxy),
    "proxyPeakMemoryBytes": Field(Int("The front proxies' peak memory, bytes.", nullable=True), omit=_no_proxy),
    "restarts": Field(Int("Restarts of the target's containers during the stage.", nullable=True), derived=True,
                      omit=_unwatched),
    "unreadySeconds": Field(Num("Seconds its pods were unready, summed.", nullable=True), derived=True,
                            omit=_unwatched),
    "pods": Field(ListOf("The pods that restarted, were taken away or were unready.", POD_HEALTH, nullable=True),
                  omit=_unwatched),
})
