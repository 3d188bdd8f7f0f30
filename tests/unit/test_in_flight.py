"""A look counts the requests still in flight (an open model's): each worker reports how old its requests in flight
are, the master ages them back to the look's instant, and a request already slower than every latency objective
counts at its age, so that a stage whose target stalls cannot pass on the requests that got through."""

import time

from loadstage.api.types import Slo
from loadstage.locust.recorder import StageRecorder, blocks_of
from loadstage.results import histograms
from loadstage.results.judgement import judge, with_in_flight
from loadstage.results.sequential import Looks
from support.queue_sim import Queue, recorded_seconds, true_percentile_ms

LIGHT = Queue(servers=4, service_ms=20.0, utilisation=0.5, paced=True)   # 100 arrivals a second


def p99(ms):
    return Slo(None, None, None, ms / 1000, None, None)


def test_the_master_ages_each_workers_requests_in_flight_back_to_the_looks_instant():
    worker, master = StageRecorder(), StageRecorder()
    now = time.time()
    worker.in_flight.started(1, now - 2.0)     # in flight for 2 s
    worker.in_flight.started(2, now - 0.5)     # began after the look's instant below
    worker.in_flight.started(3, now - 5.0)
    worker.in_flight.ended(3)                  # its task ended
    master.merge_report(worker.report(), worker="w1")
    at_look = master.in_flight.at(now - 1.0)
    assert at_look.get_total_count() == 1
    assert abs(at_look.get_max_value() / 1e6 - 1000) < 5    # 2 s old at the report: 1 s at the look
    assert master.in_flight.at(now + 1.0).get_total_count() == 0   # no report after it: nothing known


def test_a_request_that_completes_restarts_its_users_clock_and_an_idle_worker_reports_none():
    worker, master = StageRecorder(), StageRecorder()
    worker.in_flight.started(7, time.time() - 3.0)
    worker.on_request("GET", "/", 12.0, context={"loadstage_intended": time.time() - 3.0, "loadstage_user": 7})
    assert time.time() - worker.in_flight.busy[7] < 1.0    # the task's next request began as the first completed
    worker.in_flight.ended(7)
    data = worker.report()
    assert "inFlight" not in data
    master.merge_report(data, worker="w1")
    assert master.in_flight.at(time.time() - 1.0).get_total_count() == 0


def stalled_look(stall_from: int, look_at: int, seed: int = 1):
    """A light stage whose target stops answering at `stall_from` s: the seconds before it, the empty seconds
    after it, and the arrivals since it in flight at the look (100 a second, each as old as it is then)."""
    closed = recorded_seconds(LIGHT.stage(stall_from, seed=seed))
    closed += [[None, 0.0, 0, 0]] * (look_at - stall_from)
    stuck = histograms.new()
    for k in range((look_at - stall_from) * 100):
        stuck.record_value(histograms.to_ns((look_at - stall_from - k / 100) * 1000))
    return blocks_of(closed, float(look_at)), stuck


def test_a_look_at_a_stalled_target_counts_its_stuck_requests_and_does_not_pass_it():
    limit = 3 * true_percentile_ms(Queue(servers=4, service_ms=20.0, utilisation=0.5), 0.99)
    section, stuck = stalled_look(stall_from=12, look_at=15)
    confidence = Looks.schedule(30.0).confidences[1]
    blind = judge(p99(limit), section, confidence, final=False)
    seen = judge(p99(limit), with_in_flight(p99(limit), section, stuck), confidence, final=False)
    assert blind.outcome == "Pass"        # the requests that got through were all fast
    # 3 s of arrivals stuck, most older than the objective: its p99 is theirs; all in one batch of the stage's 15
    # (one observation of a t-interval), so the stage runs on rather than fail at this look
    assert seen.outcome == "Undecided" and seen.objectives[0].value > 2000
    assert with_in_flight(p99(limit), section, stuck)["inFlight"] == sum(
        1 for k in range(300) if (3 - k / 100) * 1000 >= limit)


def test_requests_in_flight_younger_than_the_objective_are_left_out():
    section, stuck = stalled_look(stall_from=12, look_at=15)
    assert with_in_flight(p99(5000.0), section, stuck) is section   # none stuck for 5 s yet
    assert with_in_flight(Slo(None, None, None, None, None, 0.01), section, stuck) is section   # no latency limit
