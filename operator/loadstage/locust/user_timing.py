"""When each user starts its tasks: its wait between them (loadstage's --wait-min/--wait-max, the class's own
wait_time, a --pacing schedule, or its next --arrival-rate arrival), and each request's intended start. In an open
model (pacing, arrivals) the recorder also keeps when each busy user's request began: its requests in flight."""

import random
import time

from loadstage.locust import compat


def wait_time_of(own_wait_time):
    """A user's wait: with --arrival-rate until its next arrival; on --pacing the fixed schedule; else the class's
    own wait_time, if it has one; else --wait-min..--wait-max. Decided at each call: workers get the master's
    options at spawn."""
    def wait_time(user):
        options, recorder = user.environment.parsed_options, user.environment.loadstage
        if options.arrival_rate:
            recorder.in_flight.ended(id(user))
            user.loadstage_intended = user.environment.loadstage_arrivals.take()
            recorder.in_flight.started(id(user), time.time())
            return 0.0
        if options.pacing:
            recorder.in_flight.ended(id(user))
            # the wait until this user's next intended start; 0 when it runs late (no slot is skipped)
            user.loadstage_intended = getattr(user, "loadstage_intended", time.time()) + options.pacing
            recorder.in_flight.started(id(user), max(user.loadstage_intended, time.time()))
            return max(0.0, user.loadstage_intended - time.time())
        if own_wait_time is not None:
            return own_wait_time(user)
        return random.uniform(options.wait_min, options.wait_max)
    return wait_time


def first_on_arrival(on_start):
    """A user's first task waits for an arrival too (Locust runs it at once after on_start)."""
    def on_start_on_arrival(user):
        with compat.waiting(user):
            user.loadstage_intended = user.environment.loadstage_arrivals.take()
        user.environment.loadstage.in_flight.started(id(user), time.time())
        on_start(user)
    return on_start_on_arrival


def with_intended_start(context):
    def paced_context(user):
        if not hasattr(user, "loadstage_intended"):
            user.loadstage_intended = time.time()
        return {**context(user), "loadstage_intended": user.loadstage_intended, "loadstage_user": id(user)}
    return paced_context
