"""How close each resource of the target came to its limit during a stage (status.variants[].stages[].saturation),
and the resource that limited capacity at a knee (limitedBy); each type beside its declaration. How each signal
is measured: docs/measurement.md; the thresholds and the order they are read in: loadstage.results.saturation."""

from __future__ import annotations

from dataclasses import dataclass

from loadstage.api.schema import Bool, Field, Int, ListOf, Num, Obj, Str, Written, omit_empty, omit_none

RESOURCES = ("Cpu", "Concurrency", "Backlog", "Redis", "Memory", "Injectors", "Unknown")


@dataclass(frozen=True)
class Saturation(Written):
    """Each signal None where it was not measured (a cluster cannot see it, Redis is not deployed, ...)."""
    cpu_cores: float | None = None           # the target's mean CPU over the settled seconds, else its peak
    cpu_capacity_cores: float | None = None  # what it can use: its limit, one core a worker process, the machine
    throttled_share: float | None = None     # of the CFS periods in which it ran, the share throttled
    in_flight: float | None = None           # requests in the target at once (Little's law)
    concurrency: int | None = None           # requests it serves at once: pods x workers x threads
    backlog_peak: int | None = None          # the most connections waiting in its listen queues at once
    backlog_limit: int | None = None         # their length
    listen_overflows: int | None = None      # connections the kernel dropped for a full listen queue
    memory_bytes: int | None = None          # the target's peak memory
    memory_limit_bytes: int | None = None
    oom_kills: int | None = None
    redis_cpu_share: float | None = None     # Redis's CPU, of its limit or of the one core it can use
    redis_max_clients: int | None = None
    redis_rejected: int | None = None        # connections Redis refused (maxclients)
    redis_usec_per_call: float | None = None  # its mean command time, microseconds
    injector_cpu_share: float | None = None  # the busiest injector's peak CPU, of a core
    crossed: tuple[str, ...] = ()            # the resources whose signals crossed their thresholds, in order

    @property
    def cpu_share(self) -> float | None:
        return None if self.cpu_cores is None or not self.cpu_capacity_cores else \
            self.cpu_cores / self.cpu_capacity_cores

    @property
    def concurrency_share(self) -> float | None:
        return None if self.in_flight is None or not self.concurrency else self.in_flight / self.concurrency

    @property
    def memory_share(self) -> float | None:
        return None if self.memory_bytes is None or not self.memory_limit_bytes else \
            self.memory_bytes / self.memory_limit_bytes


def _share(text: str) -> Num:
    return Num(text, nullable=True)


SATURATION = Obj(Saturation, "How close each resource came to its limit during the stage (absent: not measured).", {
    "cpuCores": Field(Num("The target's CPU, cores: its mean over the stage's settled seconds (locally cgroup or "
                          "process times every half second, in a cluster metrics.k8s.io's windows), else its peak.",
                          nullable=True),
                      omit=omit_none),
    "cpuCapacityCores": Field(Num("The CPU it can use, cores: per pod the least of its CPU limit and one core a "
                                  "worker process (the GIL); locally at most the machine's cores.", nullable=True),
                              omit=omit_none),
    "throttledShare": Field(_share("Of the CFS periods (100 ms) in which the target ran, the share in which its "
                                   "CPU limit throttled it (cgroup cpu.stat)."), omit=omit_none),
    "inFlight": Field(Num("Requests in the target at once, from Little's law: served req/s x mean latency "
                          "(waiting to be accepted included).", nullable=True), omit=omit_none),
    "concurrency": Field(Int("Requests the target serves at once: pods x workers x threads (an ASGI app's "
                             "sync pool for threads).", nullable=True), omit=omit_none),
    "backlogPeak": Field(Int("The most connections waiting at once in the target's listen queues (their "
                             "Recv-Q, /proc/net/tcp, every half second).", nullable=True), omit=omit_none),
    "backlogLimit": Field(Int("Their length: spec.target.backlog, at most net.core.somaxconn.", nullable=True),
                          omit=omit_none),
    "listenOverflows": Field(Int("Connections the kernel dropped for a full listen queue during the stage "
                                 "(TcpExt ListenOverflows of the network namespace; locally, the machine's).",
                                 nullable=True), omit=omit_none),
    "memoryBytes": Field(Int("The target's peak memory, bytes.", nullable=True), omit=omit_none),
    "memoryLimitBytes": Field(Int("Its memory limit, all pods, bytes.", nullable=True), omit=omit_none),
    "oomKills": Field(Int("Processes of the target the kernel killed for its memory limit (cgroup "
                          "memory.oom_control or memory.events).", nullable=True), omit=omit_none),
    "redisCpuShare": Field(_share("Redis's CPU (INFO cpu) while the load ran, of its limit or of the one core "
                                  "it can use."), omit=omit_none),
    "redisMaxClients": Field(Int("Redis's maxclients (INFO clients).", nullable=True), omit=omit_none),
    "redisRejected": Field(Int("Connections Redis refused during the stage (INFO stats rejected_connections).",
                               nullable=True), omit=omit_none),
    "redisUsecPerCall": Field(Num("Redis's mean command time over the stage, microseconds (INFO commandstats).",
                                  nullable=True), omit=omit_none),
    "injectorCpuShare": Field(_share("The busiest injector's peak CPU, of a core."), omit=omit_none),
    "crossed": Field(ListOf("The resources whose signals crossed their thresholds, the one that limits first "
                            "(docs/measurement.md).", Str("A resource.", enum=RESOURCES[:-1])), absent=(),
                     omit=omit_empty),
}, nullable=True)


@dataclass(frozen=True)
class LimitedBy(Written):
    """The resource that limited capacity at a knee, the sentence with its numbers, and whether the figure jumped."""
    resource: str
    evidence: str
    cliff: bool
    remedy: str


LIMITED_BY = Obj(LimitedBy, "The resource that limited capacity where the objective broke, read from that stage's "
                            "saturation.", {
    "resource": Str("Cpu, Concurrency, Backlog, Redis, Memory, Injectors; Unknown where no signal crossed its "
                    "threshold.", enum=RESOURCES),
    "evidence": Str("The signals, with their numbers, at the stage that broke the objective."),
    "cliff": Bool("The objective's figure more than doubled across the bracket (a cliff), rather than climbing "
                  "toward the objective (a knee)."),
    "remedy": Str("What would move the knee."),
}, nullable=True)
