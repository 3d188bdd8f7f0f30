"""Processes the tests start and look for: a loopback redis-server, and what a process left behind."""

import contextlib

import psutil

from support.waiting import wait_for


def start_redis(supervisor, tmp_path, port, *extra_args):
    import redis

    from loadstage.launch import argv as commands
    child = supervisor.start("redis", commands.redis_command(port=port, bind="127.0.0.1") + list(extra_args),
                             log_path=tmp_path / f"redis-{port}.log", cwd=tmp_path)

    def up():
        try:
            return redis.Redis(port=port, socket_connect_timeout=0.2).ping()
        except redis.AuthenticationError:
            return True
        except redis.ConnectionError:
            return False
    wait_for(up)
    return child


def descendants(pid):
    import psutil
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def alive(processes):
    return [p for p in processes if p.is_running() and p.status() != "zombie"]


def listening(processes):
    """The addresses the processes listen on; one that ends while it is read listens on nothing."""
    found = []
    for p in alive(processes):
        with contextlib.suppress(psutil.NoSuchProcess):
            found += [c.laddr for c in p.net_connections("inet") if c.status == psutil.CONN_LISTEN]
    return found
