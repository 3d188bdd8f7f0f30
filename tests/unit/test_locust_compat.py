"""Every use of Locust's internals (loadstage.locust.compat) against the installed Locust: a real master
and a real worker runner in this process, talking over loopback. An upgrade that renames what the
extension relies on fails here, naming it."""

import gevent
import gevent.event
import gevent.pool
from locust import User, constant, task
from locust.env import Environment
from locust.event import Events

from loadstage.local.ports import free_port
from loadstage.locust import compat
from support.waiting import wait_for


class Idle(User):
    wait_time = constant(1)

    @task
    def nothing(self):
        pass


def test_a_master_and_a_worker_expose_what_the_extension_uses():
    port = free_port()
    master_env = Environment(user_classes=[Idle], events=Events())
    master = master_env.create_master_runner("127.0.0.1", port)
    worker_env = Environment(user_classes=[Idle])
    worker = worker_env.create_worker_runner("127.0.0.1", port)
    reports = []
    master_env.events.worker_report.add_listener(lambda client_id, data: reports.append(client_id))
    try:
        assert compat.is_master(master) and not compat.is_worker(master)
        assert compat.is_worker(worker) and not compat.is_master(worker)
        wait_for(lambda: (gevent.sleep(0.05), compat.ready_workers(master) == 1)[1], timeout=10)
        assert compat.connected_workers(master) == 1
        assert compat.worker_ids(master) == {worker.client_id}
        assert compat.workers_seen(master) == 1 and compat.workers_seen(worker) is None
        assert compat.worker_index(worker) == 0
        assert all(callable(session.request) for session in compat.http_sessions())
        assert compat.connected_workers(worker) == 1
        assert 0 < compat.REPORT_INTERVAL_SECONDS <= 5
        compat.report_now(worker)
        wait_for(lambda: (gevent.sleep(0.05), worker.client_id in reports)[1], timeout=5)
        cpu = compat.worker_cpu_percent(master)
        assert list(cpu) == [worker.client_id] and 0 <= cpu[worker.client_id] <= 100
        assert compat.worker_cpu_percent(worker) == {}
    finally:
        worker.quit()
        master.quit()


class WaitsBeforeItsFirstTask(User):
    wait_time = constant(1)

    def on_start(self):
        with compat.waiting(self):
            gevent.event.Event().wait()   # an arrival that never comes

    @task
    def nothing(self):
        pass


def test_a_user_waiting_before_its_first_task_is_stopped_at_once_not_after_the_stop_timeout():
    group = gevent.pool.Group()
    user = WaitsBeforeItsFirstTask(Environment(user_classes=[WaitsBeforeItsFirstTask]))
    greenlet = user.start(group)
    gevent.sleep(0)
    assert user.stop() is True     # killed, as in Locust's own wait; a running user would be left to finish
    gevent.sleep(0)
    assert greenlet.dead
