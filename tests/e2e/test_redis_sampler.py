"""The Redis sampler against a real redis-server: the peak of connections, and a Redis whose ACL refuses
INFO (a managed service's restricted user), which the stage's status names instead of showing nothing."""

import redis

from loadstage.local.ports import free_port
from loadstage.samplers.redis import RedisSampler
from support.processes import start_redis
from support.waiting import wait_for


def test_the_peak_counts_other_clients_and_a_refused_info_is_named(supervisor, tmp_path):
    port = free_port()
    start_redis(supervisor, tmp_path, port)
    url = f"redis://127.0.0.1:{port}/0"
    clients = [redis.Redis.from_url(url) for _ in range(3)]
    for client in clients:
        client.ping()
    # and no other: Redis counts a connection closed moments ago (start_redis's probe) until it has read its end
    wait_for(lambda: len(clients[0].client_list()) == 3, timeout=5)
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
