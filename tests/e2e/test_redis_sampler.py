"""The Redis sampler against a real redis-server: the peak of connections, and a Redis whose ACL refuses
INFO (a managed service's restricted user), which the stage's status names instead of showing nothing."""

import shutil
import tempfile
from pathlib import Path

import redis

from loadstage.launch import argv as commands
from loadstage.samplers.redis import RedisSampler
from support.waiting import wait_for


def answering(clients):
    try:
        return all(client.ping() for client in clients)
    except redis.ConnectionError:
        return False


def test_the_peak_counts_other_clients_and_a_refused_info_is_named(supervisor):
    # on a Unix socket of its own: a loopback port may be picked at once by a process of a test beside, whose
    # app then stays connected (three full runs saw a fourth client, once for five seconds and more)
    directory = Path(tempfile.mkdtemp(prefix="rs-", dir="/tmp"))
    socket = directory / "redis.sock"
    supervisor.start("redis", [*commands.redis_command(port=0, bind="127.0.0.1"), "--unixsocket", str(socket)],
                     log_path=directory / "redis.log", cwd=directory)
    url = f"unix://{socket}?db=0"
    clients = [redis.Redis.from_url(url) for _ in range(3)]
    wait_for(lambda: answering(clients))
    with RedisSampler(url, interval=0.05) as sampler:
        wait_for(lambda: sampler._peaks.samples >= 3, timeout=5)
    assert sampler.result.peak == 3 and sampler.result.covers() == "stage"

    clients[0].execute_command("ACL", "SETUSER", "default", "-info")
    with RedisSampler(url, interval=0.05) as refused:
        wait_for(lambda: refused._peaks.errors >= 3, timeout=5)
    assert refused.result.peak is None
    assert refused.result.covers().startswith("nothing: every INFO failed (NoPermissionError: ")
    assert "'info' command" in refused.result.covers()
    for client in clients:
        client.close()
    supervisor.stop_all()
    shutil.rmtree(directory)
