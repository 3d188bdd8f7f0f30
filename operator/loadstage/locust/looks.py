"""With --slo, the master's looks at a running stage's intervals: it ends the stage once its verdict is decided."""

import time

import gevent

from loadstage.api.wire import Decision, read_slo_argument
from loadstage.results import intervals
from loadstage.results.sequential import LOOK_DELAY_SECONDS, LOOK_RESAMPLES, Looks, breached, figures_of
from loadstage.results.thresholds import held, outcome_of


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
                break
        # the bootstrap takes a share of a second: in a thread, so that the master keeps merging reports
        found = section and gevent.get_hub().threadpool.apply(
            intervals.of_artifacts, ([section],), {"seed": f"look {number}", "confidence": looks.confidence,
                                                   "resamples": LOOK_RESAMPLES})
        environment.loadstage_looks = number
        raised = sum(recorder.exceptions.values())
        objectives = held(slo, figures_of(section) if section else {},
                          intervals.with_exceptions(found, raised, environment.stats.total.num_requests))
        if breached(objectives):
            environment.loadstage_ended_by = "Breached"
        elif time.time() - started >= options.decide_min and outcome_of(objectives) != "Undecided":
            environment.loadstage_ended_by = "Decided"
        else:
            continue
        # the verdict of record is this look's: the seconds after it (the stop) are not what it decided on
        environment.loadstage_decision = Decision(atSeconds=at, confidence=looks.confidence, objectives=objectives)
        gevent.spawn(end_stage, environment, 0)
        return
