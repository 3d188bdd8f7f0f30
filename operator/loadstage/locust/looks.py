"""With --slo, the master's looks at a running stage's intervals: it ends the stage once its verdict is decided."""

import time

import gevent

from loadstage.api.status import Verdict
from loadstage.api.wire import Decision, read_slo_argument
from loadstage.results.judgement import judge, with_in_flight
from loadstage.results.sequential import LOOK_DELAY_SECONDS, Looks, breached


def decide(environment, options, end_stage):
    """At each look of the schedule (loadstage.results.sequential) before the stage's last: its intervals so far,
    held against the objectives; a breach, or a verdict decided from --decide-min on, ends the stage (end_stage)."""
    slo = read_slo_argument(options.slo)
    looks = Looks.schedule(options.stage_seconds)
    started, recorder = environment.loadstage_started, environment.loadstage
    for number in range(1, len(looks.times)):
        for at in looks.tries(number):
            gevent.sleep(max(0.0, started + at + LOOK_DELAY_SECONDS - time.time()))
            if getattr(environment, "loadstage_ending", False):
                return
            section = recorder.blocks_before(started + at, started)
            if section:
                section = with_in_flight(slo, section, recorder.in_flight.at(started + at))
                break
        # the intervals take a share of a second on a long stage: in a thread, so that the master keeps merging
        verdict = gevent.get_hub().threadpool.apply(
            judge, (slo, section, looks.confidences[number - 1]), {"raised": sum(recorder.exceptions.values()),
                                                      "requests": environment.stats.total.num_requests,
                                                      "final": False})
        environment.loadstage_looks = number
        if breached(verdict.objectives):
            environment.loadstage_ended_by = "Breached"
        elif at >= options.decide_min and verdict.outcome != "Undecided":   # the seconds judged, not the wall's
            environment.loadstage_ended_by = "Decided"
        else:
            continue
        # the verdict of record is this look's: the seconds after it (the stop) are not what it decided on
        environment.loadstage_decision = Decision(atSeconds=at, confidence=looks.confidences[number - 1],
                                                  objectives=list(verdict.objectives),
                                                  settleSeconds=verdict.settle_seconds or 0,
                                                  **_batches(verdict))
        gevent.spawn(end_stage, environment, 0)
        return


def _batches(verdict: Verdict) -> dict:
    return {} if verdict.batches is None else {"batchSeconds": verdict.batch_seconds, "batches": verdict.batches}
