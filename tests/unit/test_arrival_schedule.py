"""An arrival rate (loadstage.locust.arrivals): its schedule is exact across injectors, its scheduler hands each
arrival to a free user or counts it dropped, and a stage that drops over 1% is injector-bound. The scheduler runs
in real gevent greenlets here, for a fraction of a second."""

import itertools
import math
import time

import gevent
from hypothesis import given
from hypothesis import strategies as st
from locust.stats import RequestStats

from loadstage.locust.arrivals import Arrivals, intended_starts, offset
from loadstage.locust.recorder import StageRecorder
from loadstage.locust.summary import build


@given(rate=st.integers(1, 20_000), injectors=st.integers(1, 64), seconds=st.floats(0.05, 30))
def test_the_injectors_together_start_one_arrival_every_1_over_rate_seconds(rate, injectors, seconds):
    shares = [intended_starts(rate, injectors, i, seconds) for i in range(injectors)]
    together = sorted(at for share in shares for at in share)
    asked = rate * seconds
    assert math.floor(asked) <= len(together) <= math.ceil(asked) + 1   # the stage's rate (+1: float rounding)
    assert together[:1] in ([], [0.0])
    gaps = [b - a for a, b in itertools.pairwise(together)]
    assert all(math.isclose(gap, 1 / rate, rel_tol=1e-6) for gap in gaps)   # evenly, never two at once
    assert max(map(len, shares)) - min(map(len, shares)) <= 1              # a fair share each


def users(arrivals, count, work_seconds, started):
    """`count` users, each taking an arrival, noting how late it began, then working `work_seconds`."""
    def user():
        while True:
            intended = arrivals.take()
            started.append(time.time() - intended)
            gevent.sleep(work_seconds)
    return [gevent.spawn(user) for _ in range(count)]


def run_until(arrivals, pool, count, stalls=None):
    """(how late each handed arrival began, how long the scheduler took to make `count` arrivals). It stops on
    the count, not on a clock, so that a stall of the machine near the end cannot cut arrivals short. `stalls`
    gets each pause of this process over 20 ms, in seconds, as this loop saw it (a busy machine's)."""
    lateness = []
    greenlets = users(arrivals, *pool, lateness)
    gevent.sleep(0)   # the users wait before the first arrival
    began = last = time.time()
    arrivals.start(began)
    with gevent.Timeout(30):
        while arrivals.arrived < count:
            gevent.sleep(0.001)
            now = time.time()
            if stalls is not None and now - last > 0.02:
                stalls.append(now - last)
            last = now
    ran = time.time() - began
    arrivals.stop()
    gevent.killall(greenlets)
    return lateness, ran


def median(values):
    return sorted(values)[len(values) // 2]


def test_a_pool_with_a_free_user_for_every_arrival_drops_none_and_starts_each_on_time():
    arrivals = Arrivals(rate=200, injectors=2, index=1)    # 100 a second on this injector, from 5 ms on
    stalls = []
    lateness, ran = run_until(arrivals, (10, 0.001), 50, stalls)
    assert ran >= offset(200, 2, 1, 49)  # never early: the 50th arrival is due 0.495 s in
    # a stall of the machine bunches arrivals: after one of over 100 ms (10 arrivals due) the 10 users cannot take
    # them all, and the rest are dropped; none is dropped otherwise (3 users dropped 4 beside a busy machine; a
    # busy suite once stalled this process long enough to drop 19)
    bunched = sum(max(0, math.ceil(100 * stall) - 10) for stall in stalls)
    assert arrivals.dropped <= 2 + bunched, (arrivals.dropped, stalls)
    assert len(lateness) == arrivals.arrived - arrivals.dropped
    assert min(lateness) >= 0 and median(lateness) < 0.01   # begun when intended: not early, not batched late


def test_an_arrival_that_finds_every_user_busy_is_dropped_not_queued():
    arrivals = Arrivals(rate=100, injectors=1, index=0)
    lateness, ran = run_until(arrivals, (1, 0.045), 50)   # one user, busy 45 ms of every arrival's 10 ms
    assert ran >= offset(100, 1, 0, 49)
    assert len(lateness) == arrivals.arrived - arrivals.dropped
    # the user takes about one arrival in five (a stall only makes it fewer): the rest are dropped, not kept
    assert len(lateness) >= 5 and arrivals.dropped / arrivals.arrived >= 0.6
    # a dropped arrival is not run late instead: queued, the i-th taken would begin some i x 35 ms late (its user
    # busy 45 ms an arrival due every 10 ms); taken at once, only a stall of the machine delays one (13.7 ms the
    # median beside a busy suite's image builds, once)
    queued = median([i * 0.035 for i in range(len(lateness))])
    assert median(lateness) < queued / 2, (lateness, queued)


def test_a_stage_of_given_seconds_makes_its_share_of_arrivals_from_the_masters_instant_and_ends_by_itself():
    arrivals = Arrivals(rate=500, injectors=2, index=1)
    lateness = []
    greenlets = users(arrivals, 3, 0.001, lateness)
    gevent.sleep(0)
    began = time.time() - 0.05      # the master's instant, 50 ms before this injector heard of it
    arrivals.start(began, 0.2)
    with gevent.Timeout(10):
        while not arrivals.ended:
            gevent.sleep(0.005)
    gevent.killall(greenlets)
    assert arrivals.arrived == len(intended_starts(500, 2, 1, 0.2)) == 50   # its share, to the arrival
    assert time.time() - began >= offset(500, 2, 1, 49)                    # the last one not early
    assert max(lateness) >= 0.04 > median(lateness)   # those already due began at once, the rest on time


def test_a_user_stopped_while_it_waits_gets_no_arrival():
    arrivals = Arrivals(rate=1000, injectors=1, index=0)
    waiting = gevent.spawn(arrivals.take)
    gevent.sleep(0)
    waiting.kill()
    arrivals.start()
    gevent.sleep(0.02)
    arrivals.stop()
    assert arrivals.arrived >= 5 and arrivals.dropped == arrivals.arrived


def headline_with(arrived, dropped, workers=2):
    stats, master = RequestStats(), StageRecorder()
    stats.log_request("GET", "/", 10, 10)
    for worker in range(workers):   # each worker's latest cumulative counts; an older report is superseded
        worker_recorder = StageRecorder(own_arrivals=(arrived // workers // 2, 0))
        master.merge_report(worker_recorder.report(), worker=f"w{worker}")
        worker_recorder.own_arrivals = (arrived // workers, dropped // workers)
        master.merge_report(worker_recorder.report(), worker=f"w{worker}")
    return build(stats, master)[0]


def test_a_stage_that_drops_over_1_percent_of_its_arrivals_is_injector_bound():
    at_bound, over = headline_with(10_000, 100), headline_with(10_000, 102)
    assert (at_bound["arrivals"], at_bound["droppedArrivals"], at_bound["injectorBound"]) == (10_000, 100, False)
    assert (over["droppedArrivals"], over["injectorBound"]) == (102, True)
    closed = build(RequestStats(), StageRecorder())[0]
    assert "arrivals" not in closed and "droppedArrivals" not in closed


def test_a_stage_that_ends_while_its_scheduler_runs_late_still_makes_the_arrivals_due_in_it():
    arrivals = Arrivals(rate=1000, injectors=1, index=0)
    arrivals.start(time.time() - 0.2, 0.1)     # every one of its 100 arrivals is already due
    arrivals.finish(5)                          # the stage ends before the scheduler has run at all
    assert arrivals.ended and arrivals.arrived == 100 == arrivals.dropped   # made (no user waited), none lost
    unbounded = Arrivals(rate=1000, injectors=1, index=0)
    unbounded.start()
    started = time.monotonic()
    unbounded.finish(5)                          # no schedule to finish: stopped at once
    assert time.monotonic() - started < 1 and unbounded.ended
