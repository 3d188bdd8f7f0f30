"""Many experiments at once on the kwok cluster, the test playing the kubelet: what the operator costs at that
scale. The cluster test runs it at the size that proves the property; benchmarks/operator_scale.py at full size."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from support.kube import GROUP, PLURAL, VERSION, example, finish_stage, pods
from support.waiting import wait_for


@dataclass(frozen=True)
class AtOnce:
    experiments: int
    running_seconds: float      # from the first create to every experiment Running with its stage's pods Running
    threads: int                # the operator's, then
    rss_mib: float
    cpu_seconds: float
    finishing_seconds: float    # playing the kubelet for every stage
    succeeded_seconds: float    # from the last stage finished to every experiment Succeeded
    rss_end_mib: float
    cpu_end_seconds: float
    last_status: dict

    def line(self) -> str:
        return (f"{self.experiments} experiments: all Running with every stage pod Running "
                f"{self.running_seconds:.0f} s "
                f"after the first was created; the operator then had {self.threads} threads, {self.rss_mib:.0f} MiB "
                f"resident, {self.cpu_seconds:.0f} s CPU; all Succeeded {self.succeeded_seconds:.0f} s after the last "
                f"stage was finished (finishing took {self.finishing_seconds:.0f} s); {self.rss_end_mib:.0f} MiB, "
                f"{self.cpu_end_seconds:.0f} s CPU at the end")


def proc_figures(pid: int) -> tuple[int, float, float]:
    """Threads, resident memory (MiB) and CPU seconds of a process, from /proc."""
    status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status").read().splitlines())
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return int(status["Threads"]), int(status["VmRSS"].split()[0]) / 1024, cpu


def one_stage_experiment() -> dict:
    """examples/cluster-ladder.yaml cut to one long stage of one injector, with one runner pod and an external
    Redis: the least each experiment asks of the cluster."""
    doc = example("cluster-ladder")
    doc["spec"]["target"]["pods"] = 1
    doc["spec"]["redis"] = {"url": "redis://redis.example:6379/0"}
    doc["spec"]["stages"] = [{"injectors": 1, "duration": "20m"}]
    return doc


def phases(cluster, namespace) -> list[str | None]:
    items = cluster.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"]
    return [(i.get("status") or {}).get("phase") for i in items]


def many_at_once(cluster, namespace, operator_pid: int, stage, count: int) -> AtOnce:
    """Creates `count` one-stage experiments at once, waits until each is Running with its stage's pods, finishes
    every stage as a kubelet would, and waits until all have Succeeded."""
    doc = one_stage_experiment()
    names = [f"many-{i:03d}" for i in range(count)]
    started = time.monotonic()
    for name in names:
        cluster.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL,
                                                       {**doc, "metadata": {"name": name}})
    wait_for(lambda: phases(cluster, namespace).count("Running") == count, timeout=600, interval=1)
    wait_for(lambda: len([p for p in pods(cluster, namespace, "loadstage.io/run=v1-s1")
                          if p.status.phase == "Running"]) == 2 * count, timeout=300, interval=1)
    running = time.monotonic() - started
    threads, rss, cpu = proc_figures(operator_pid)
    finishing = time.monotonic()
    for name in names:
        finish_stage(cluster, namespace, f"{name}-v1-s1-master", f"{name}-v1-s1-workers", stage)
    finished = time.monotonic()

    def stuck() -> str:
        items = cluster.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"]
        left = [(i["metadata"]["name"], (i.get("status") or {}).get("message")) for i in items
                if (i.get("status") or {}).get("phase") != "Succeeded"]
        return f"{len(left)} experiments did not finish: {left[:10]}"
    wait_for(lambda: phases(cluster, namespace).count("Succeeded") == count, timeout=240, interval=1, explain=stuck)
    done = time.monotonic()
    _, rss_end, cpu_end = proc_figures(operator_pid)
    return AtOnce(count, running, threads, rss, cpu, finished - finishing, done - finished, rss_end, cpu_end,
                  cluster.status(namespace, names[-1]))


@dataclass(frozen=True)
class BigStage:
    injectors: int
    running_seconds: float      # from the worker Job's creation to every worker pod Running
    parallelism: int
    completions: int
    stage: dict                 # as recorded in the status

    def line(self) -> str:
        return f"{self.injectors} worker pods Running {self.running_seconds:.1f} s after their Job was created"


def one_big_stage(cluster, namespace, stage, injectors: int, name: str = "cluster-ladder") -> BigStage:
    """One experiment whose only stage has `injectors` workers: waits for every worker pod to run, then finishes
    the stage as a kubelet would and waits for Succeeded."""
    doc = example("cluster-ladder")
    doc["spec"]["stages"] = [{"injectors": injectors, "duration": "20m"}]
    cluster.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, doc)
    # the worker Job itself: the master Job, made a moment before it, carries the same run label
    job = wait_for(lambda: next((j for j in cluster.batch.list_namespaced_job(
        namespace, label_selector="loadstage.io/run=v1-s1").items if j.metadata.name.endswith("-workers")), None),
        timeout=60)
    workers = f"{name}-v1-s1-workers"
    wait_for(lambda: len([p for p in pods(cluster, namespace, f"job-name={workers}")
                          if p.status.phase == "Running"]) >= injectors, timeout=300, interval=1)
    running = time.time() - job.metadata.creation_timestamp.timestamp()
    assert cluster.status(namespace, name)["phase"] == "Running"
    finish_stage(cluster, namespace, f"{name}-v1-s1-master", workers, stage)
    wait_for(lambda: cluster.status(namespace, name).get("phase") == "Succeeded", timeout=120)
    (recorded,) = cluster.status(namespace, name)["variants"][0]["stages"]
    return BigStage(injectors, running, job.spec.parallelism, job.spec.completions, recorded)
