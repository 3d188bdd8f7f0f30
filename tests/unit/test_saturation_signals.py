"""Why the knee is where it is: each saturation signal read from what the kernel and Redis say, the resource
named from the signals (in their order, never a guess), a cliff told from a knee, and the search's and the
report's sentence."""

import copy
import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loadstage.api.load import parse_experiment
from loadstage.api.status import Latency, Objective, RunStatus, Saturation, StageResult, TargetFigures, Verdict
from loadstage.api.types import ResourceList, Resources, Variant
from loadstage.local.cgroups import PodCgroup
from loadstage.reports.tables import saturation_cell
from loadstage.reports.terminal import render_capacity
from loadstage.results.saturation import Counters, capacities, completed, crossed, limited_by, redis_cpu_share
from loadstage.samplers.listen_queue import backlog_limit, listen_overflows, queued
from loadstage.samplers.redis import _Peaks
from support.played import KneeBackend, run


def stage(number=1, *, p99=50.0, limit=100.0, rps=100.0, mean_ms=20.0, saturation=None, injector_bound=False,
          injector_cpu=None, redis_peak=None, holds=True):
    objective = Objective("p99", limit, p99, (p99 * 0.9, p99 * 1.1), holds)
    verdict = Verdict(holds is True, () if holds is not False else ("p99 breaks",), objectives=(objective,))
    return StageResult(stage=number, injectors=1, users=10, duration_seconds=30.0, started_at=None, finished_at=None,
                       requests=3000, failures=0, error_rate=0.0, rps=rps, mean_ms=mean_ms,
                       latency=Latency(p99=p99, n=3000), by_method={}, redis_peak_connections=redis_peak,
                       redis_connections_received=None, target=TargetFigures(),
                       injector_peak_cpu_percent=injector_cpu, injector_bound=injector_bound, verdict=verdict,
                       saturation=saturation)


def variant(**kw):
    return Variant(**{"index": 0, "server": "gunicorn", "pods": 1, "workers": 2, "threads": 4,
                      "worker_class": "gthread", **kw})


def test_what_a_target_can_use_is_its_limit_one_core_a_worker_process_and_its_threads():
    assert capacities(variant()).concurrency == 8
    assert capacities(variant()).cpu_capacity_cores == 2            # two processes: two cores at most (the GIL)
    limited = variant(pods=3, resources=Resources(limits=ResourceList(cpu="500m", memory="256Mi")))
    assert (capacities(limited).cpu_capacity_cores, capacities(limited).memory_limit_bytes) == (1.5, 3 * 2**28)
    assert capacities(variant(worker_class="sync")).concurrency == 8   # gunicorn's sync with threads is gthread
    assert capacities(variant(worker_class="gevent")).concurrency is None   # green threads: no bound
    assert capacities(variant(server="waitress", workers=1, worker_class=None, threads=6)).concurrency == 6
    assert capacities(variant(server="bjoern", workers=3, threads=None, worker_class=None)).concurrency == 3
    assert capacities(variant(workers=None)).concurrency is None      # a Deployment's own workers


def test_littles_law_and_the_capacities_complete_what_the_backend_measured():
    measured = Saturation(cpu_capacity_cores=1.0, throttled_share=0.3)   # locally: this machine has one core
    done = completed(measured, capacities(variant()), dataclasses.replace(
        stage(rps=200.0, mean_ms=40.0, injector_cpu=97.0), target=TargetFigures(peak_cpu_cores=0.9,
                                                                               mean_cpu_cores=0.8)))
    assert (done.in_flight, done.concurrency, done.cpu_cores, done.cpu_capacity_cores) == (8.0, 8, 0.8, 1.0)
    assert (done.throttled_share, done.injector_cpu_share) == (0.3, 0.97)
    assert done.crossed == ("Concurrency",)        # 8 in flight of 8; the CPU at 80% of its core, under 85%


@pytest.mark.parametrize("signals, expected", [
    (Saturation(cpu_cores=0.97, cpu_capacity_cores=1.0, in_flight=12.0, concurrency=4), "Cpu"),
    (Saturation(cpu_cores=0.2, cpu_capacity_cores=1.0, throttled_share=0.8, in_flight=12.0, concurrency=4), "Cpu"),
    (Saturation(cpu_cores=0.05, cpu_capacity_cores=1.0, in_flight=3.9, concurrency=4), "Concurrency"),
    (Saturation(cpu_cores=0.05, cpu_capacity_cores=1.0, in_flight=9.0, concurrency=1, backlog_peak=5,
                backlog_limit=4), "Backlog"),
    (Saturation(cpu_cores=0.1, cpu_capacity_cores=1.0, in_flight=9.0, concurrency=4, redis_cpu_share=0.99), "Redis"),
    (Saturation(in_flight=9.0, concurrency=4, redis_rejected=12), "Redis"),
    (Saturation(cpu_cores=0.99, cpu_capacity_cores=1.0, memory_bytes=10, memory_limit_bytes=100, oom_kills=1),
     "Memory"),
    (Saturation(cpu_cores=0.3, cpu_capacity_cores=1.0, in_flight=1.0, concurrency=4), "Unknown"),
    (None, "Unknown"),
])
def test_the_limiting_resource_is_the_first_whose_signal_crossed_its_threshold(signals, expected):
    found = limited_by(stage(2, p99=300.0, holds=False, saturation=signals), stage(1), "12 users")
    assert found.resource == expected
    if expected == "Unknown":
        assert found.evidence.startswith("nothing crossed its threshold at 12 users")
    else:
        assert " at 12 users" in found.evidence


def test_injectors_out_of_cpu_come_before_everything_they_measured():
    signals = Saturation(cpu_cores=0.99, cpu_capacity_cores=1.0, injector_cpu_share=0.99)
    broke = stage(2, holds=False, saturation=signals, injector_bound=True, injector_cpu=99.0)
    assert crossed(signals, broke) == ["Injectors", "Cpu"]
    assert limited_by(broke, None, "9 users").remedy.startswith("more injectors")
    # pools out of users while the target broke the objective: every user was waiting on the target
    waited = dataclasses.replace(broke, injector_cpu_bound=False, arrivals=1000, dropped_arrivals=50)
    assert crossed(signals, waited) == ["Cpu"]
    passed_anyway = dataclasses.replace(waited, verdict=Verdict(True))
    assert crossed(signals, passed_anyway) == ["Injectors", "Cpu"]
    assert limited_by(passed_anyway, None, "9 users").evidence.startswith("5.0% of arrivals dropped (no free user), "
                                                                         "busiest injector 99% of a core at 9 users")


def test_redis_clients_at_maxclients_name_redis_with_the_numbers():
    signals = Saturation(redis_max_clients=20, redis_usec_per_call=35.0, in_flight=2.0, concurrency=4)
    found = limited_by(stage(2, holds=False, saturation=signals, redis_peak=19), stage(1), "30 users")
    assert found.resource == "Redis"
    assert found.evidence == "19 of 20 clients, 35 µs a command at 30 users; 2.0 requests in flight of 4 at once"


def test_the_evidence_is_one_sentence_with_the_numbers_of_each_signal():
    signals = Saturation(cpu_cores=0.31, cpu_capacity_cores=1.0, throttled_share=0.0, in_flight=4.0, concurrency=4)
    found = limited_by(stage(2, p99=120.0, holds=False, saturation=signals), stage(1, p99=80.0), "8 users")
    assert found.resource == "Concurrency"
    assert found.evidence == ("4.0 requests in flight of 4 at once at 8 users; "
                              "CPU 0.31 of 1 core (31%), 0% of periods throttled")
    assert found.remedy.startswith("more threads or workers")


@pytest.mark.parametrize("passed_p99, broke_p99, cliff", [(80.0, 120.0, False), (50.0, 467.0, True),
                                                          (60.0, 120.0, True)])
def test_a_cliff_is_the_broken_figure_at_least_doubling_across_the_bracket(passed_p99, broke_p99, cliff):
    found = limited_by(stage(2, p99=broke_p99, holds=False), stage(1, p99=passed_p99), "x")
    assert found.cliff is cliff
    assert limited_by(stage(2, p99=broke_p99, holds=False), None, "x").cliff is False   # no pass end: no jump


def test_the_report_cell_shows_each_signal_against_its_limit():
    s = Saturation(cpu_cores=0.98, cpu_capacity_cores=1.0, throttled_share=0.64, in_flight=9.2, concurrency=2,
                   backlog_peak=5, backlog_limit=4, redis_cpu_share=0.12, crossed=("Cpu", "Backlog", "Concurrency"))
    assert saturation_cell(s) == "Cpu: CPU 98% (64% throttled), 9.2 of 2 busy, queue 5 of 4, Redis CPU 12%"
    assert saturation_cell(None) == saturation_cell(Saturation()) == "-"


TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000005 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 0100007F:1F90 00000000:0000 0A 00000000:00000003 00:00000000 00000000     0        0 2 1 0 100 0 0 10 0
   2: 0100007F:1F90 0100007F:D431 01 00000000:00000009 00:00000000 00000000     0        0 3 1 0 20 4 30 10 -1
   3: 0100007F:1F91 00000000:0000 0A 00000000:00000007 00:00000000 00000000     0        0 4 1 0 100 0 0 10 0
"""


def test_the_listen_queue_counts_the_accept_queues_of_every_listening_socket_on_the_ports():
    assert queued(TCP, {8080}) == 8         # two SO_REUSEPORT sockets; the established one's queue is data
    assert queued(TCP, {8080, 8081}) == 15
    assert queued(TCP, {9}) == 0


@given(st.text(alphabet="0123456789ABCDEF: \n\tx-", max_size=400), st.sets(st.integers(0, 65535), max_size=3))
def test_a_listen_table_of_any_shape_is_read_without_an_error(text, ports):
    assert queued(text, ports) >= 0


def test_listen_overflows_come_from_tcpext_and_the_backlog_is_at_most_somaxconn(tmp_path):
    netstat = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 0 17 19\nIpExt: InNoRoutes\nIpExt: 0\n"
    assert listen_overflows(netstat) == 17
    assert listen_overflows("IpExt: InNoRoutes\nIpExt: 0\n") is None
    (tmp_path / "somaxconn").write_text("128\n")
    assert backlog_limit(2048, tmp_path / "somaxconn") == 128
    assert backlog_limit(4, tmp_path / "somaxconn") == 4
    assert backlog_limit(4, tmp_path / "absent") == 4


@given(st.text(max_size=300))
def test_a_netstat_of_any_shape_is_read_without_an_error(text):
    found = listen_overflows(text)
    assert found is None or found >= 0


@pytest.mark.parametrize("version, cpu, memory", [
    (1, "nr_periods 200\nnr_throttled 150\nthrottled_time 9\n", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"),
    (2, "usage_usec 5\nnr_periods 200\nnr_throttled 150\nthrottled_usec 9\n", "low 0\noom 2\noom_kill 2\n"),
])
def test_a_cgroups_throttling_and_oom_kills_are_read_in_either_version(tmp_path, version, cpu, memory):
    (tmp_path / "cpu.stat").write_text(cpu)
    (tmp_path / "oom").write_text(memory)
    pod = PodCgroup("p", [tmp_path], tmp_path / "cpu.stat", version, tmp_path / "cpu.stat", tmp_path / "oom")
    assert pod.counters() == Counters(200, 150, 2)
    assert Counters(260, 200, 3).since(Counters(200, 150, 2)) == Counters(60, 50, 1)
    (tmp_path / "oom").write_text("oom_kill_disable 0\n")        # a kernel that does not count them
    assert pod.counters() is None


def test_redis_cpu_refusals_and_command_time_are_over_the_stage():
    peaks = _Peaks()
    peaks.add_commands({"cmdstat_get": {"calls": 100, "usec": 1000}, "cmdstat_info": {"calls": 5, "usec": 500}})
    peaks.add({"connected_clients": 3, "total_connections_received": 10, "used_cpu_sys": 1.0, "used_cpu_user": 2.0,
               "rejected_connections": 4, "maxclients": 20})
    peaks.first = {**peaks.first, "at": peaks.first["at"] - 2.0}     # two seconds earlier
    peaks.add({"connected_clients": 21, "total_connections_received": 30, "used_cpu_sys": 1.5, "used_cpu_user": 3.1,
               "rejected_connections": 9, "maxclients": 20})
    peaks.add_commands({"cmdstat_get": {"calls": 300, "usec": 7000}, "cmdstat_info": {"calls": 50, "usec": 9000}})
    found = peaks.result()
    assert (found.peak_connections, found.rejected, found.max_clients, found.usec_per_call) == (20, 5, 20, 30.0)
    assert found.cpu_cores == pytest.approx(0.8, abs=0.01)


def test_redis_cpu_is_over_the_seconds_the_load_ran_on_redis_own_clock_not_the_idle_edges_of_the_sampling():
    peaks = _Peaks()
    # a Redis held at a fiftieth of a core while the load ran (epoch 1000 to 1004), idle a second either side
    cpu = {999.0: 1.0, 1000.0: 1.0, 1001.0: 1.02, 1002.0: 1.04, 1003.0: 1.06, 1004.0: 1.08, 1005.0: 1.08}
    for at, used in cpu.items():
        peaks.add({"connected_clients": 3, "total_connections_received": 10, "used_cpu_sys": used / 2,
                   "used_cpu_user": used / 2, "server_time_usec": int(at * 1e6)})
    found = peaks.result()
    assert found.cpu_cores_within((1000.0, 1004.0)) == pytest.approx(0.02)
    assert found.cpu_cores_within((1000.2, 1003.9)) == pytest.approx(0.02)   # the readings inside it
    assert found.cpu_cores_within((1004.5, 1004.6)) == found.cpu_cores        # no two readings in it
    assert found.cpu_cores_within(None) == found.cpu_cores
    assert redis_cpu_share(found.cpu_cores_within((1000.0, 1004.0)), "20m") == 1.0


class ThrottledKnee(KneeBackend):
    """Past its knee the played target's CPU limit throttles it."""

    def run_stage(self, step):
        measured = super().run_stage(step)
        load = step.stage.users or 1
        throttled = 0.05 if load < self.knee else 0.9
        return dataclasses.replace(measured, saturation=Saturation(cpu_capacity_cores=2.0, throttled_share=throttled))


def test_a_search_names_what_limited_it_at_its_fail_end_and_the_report_says_what_would_move_the_knee(base_doc):
    doc = copy.deepcopy(base_doc)
    del doc["spec"]["stages"]
    doc["spec"].update(slo={"p99": "30ms"}, search={"load": "users", "from": 10, "max": 2000, "resolution": "10%",
                                                    "duration": "20s"})
    writes = run(parse_experiment(doc), ThrottledKnee(knee=100))
    search = writes[-1]["variants"][0]["search"]
    assert (search["pass"], search["fail"]) == (140, 150)
    assert search["limitedBy"]["resource"] == "Cpu"
    assert search["limitedBy"]["evidence"].startswith("90% of periods throttled at 150 users")
    assert search["limitedBy"]["cliff"] is False    # the played p99 climbs with the load's cube: x1.23 across it
    line = render_capacity(RunStatus.read(writes[-1]))[0]
    assert "limited by Cpu: 90% of periods throttled at 150 users" in line
    assert line.endswith("to move it: more CPU (a higher limit) or more pods")


CADVISOR = """# HELP container_cpu_cfs_periods_total Number of elapsed enforcement period intervals.
# TYPE container_cpu_cfs_periods_total counter
container_cpu_cfs_periods_total{container="",id="/kubepods/burstable/pod1",namespace="lx",pod="t-1"} 999 1700000000000
container_cpu_cfs_periods_total{container="runner",id="/kubepods/pod1/c1",name="c1",namespace="lx",pod="t-1"} 200 1
container_cpu_cfs_periods_total{container="proxy",id="/kubepods/pod1/c2",namespace="lx",pod="t-1"} 50 1700000000000
container_cpu_cfs_periods_total{container="runner",id="/kubepods/pod2/c1",namespace="lx",pod="t-2"} 100 1700000000000
container_cpu_cfs_periods_total{container="runner",id="/kubepods/pod9/c1",namespace="other",pod="t-1"} 7 1700000000000
# TYPE container_cpu_cfs_throttled_periods_total counter
container_cpu_cfs_throttled_periods_total{container="runner",id="/kubepods/pod1/c1",namespace="lx",pod="t-1"} 150 1
container_cpu_cfs_throttled_periods_total{container="runner",id="/kubepods/pod2/c1",namespace="lx",pod="t-2"} 30
container_oom_events_total{container="runner",id="/kubepods/pod1/c1",namespace="lx",pod="t-1"} 1 1700000000000
container_cpu_usage_seconds_total{container="runner",namespace="lx",pod="t-1"} 12.5 1700000000000
"""


def test_the_kubelets_cadvisor_counts_the_target_containers_throttling_and_oom_kills():
    from loadstage.kube.cadvisor import counters
    # each pod's server container: the pod's own cgroup and the proxy's left out
    assert counters(CADVISOR, "lx", {"t-1", "t-2"}) == {"t-1": Counters(200, 150, 1), "t-2": Counters(100, 30, 0)}
    # a kubelet whose cAdvisor sees only the pods' cgroups (containerd 1.6 under kubelet 1.32, cgroup v1)
    pods_only = "\n".join(line for line in CADVISOR.splitlines() if 'container="runner"' not in line)
    assert counters(pods_only, "lx", {"t-1", "t-2"}) == {"t-1": Counters(999, 0, 0)}
    assert counters(CADVISOR, "lx", {"t-3"}) == {}      # not on this node, or no CPU limit: no CFS periods
    assert counters("", "lx", {"t-1"}) == {}
    assert counters('container_cpu_cfs_periods_total{container="runner",namespace="lx",pod="t-1"} -5\n'
                    'container_cpu_cfs_periods_total{container="runner",namespace="lx",pod="t-1"} NaN', "lx",
                    {"t-1"}) == {}


@given(st.text(max_size=500), st.text(alphabet='abc{}=", 0123456789.\n_', max_size=300))
def test_a_cadvisor_text_of_any_shape_is_read_without_an_error(noise, shaped):
    from loadstage.kube.cadvisor import counters
    for text in (noise, "container_cpu_cfs_periods_total{" + shaped, CADVISOR + shaped):
        found = counters(text, "lx", {"t-1", "a"})
        assert all(min(f.periods, f.throttled, f.oom_kills) >= 0 for f in found.values())


def test_what_pods_counted_during_a_stage_is_over_the_pods_there_at_both_reads():
    from loadstage.results.saturation import since_each
    before = {"old": Counters(5000, 4000, 0), "a": Counters(100, 10, 0)}
    after = {"a": Counters(300, 160, 1), "new": Counters(50, 50, 0)}   # old replaced by new meanwhile
    assert since_each(before, after) == Counters(200, 150, 1)
    assert since_each(before, {"a": Counters(20, 2, 0)}) is None        # its container began again: counts fell
    assert since_each(None, after) is None and since_each(before, {}) is None
