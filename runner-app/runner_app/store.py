"""Questionnaire sessions in Redis, through one connection pool per worker process."""

from __future__ import annotations

import os
import secrets
import threading
import time

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

SESSION_TTL_SECONDS = 3600
_lock = threading.Lock()
_pool: tuple[int, redis.ConnectionPool] | None = None


def client() -> redis.Redis:
    """A client on this process's pool; a forked worker builds its own pool on first use."""
    global _pool
    with _lock:
        if _pool is None or _pool[0] != os.getpid():
            url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
            pool = redis.ConnectionPool.from_url(
                url, socket_connect_timeout=0.5, socket_timeout=2.0,
                retry=Retry(NoBackoff(), 0), health_check_interval=0,
                password=os.environ.get("REDIS_PASSWORD") or None)
            _pool = (os.getpid(), pool)
        return redis.Redis(connection_pool=_pool[1])


def key(sid: str) -> str:
    return f"survey:{sid}"


def start_session() -> str:
    sid = secrets.token_urlsafe(12)
    client().hset(key(sid), mapping={"page": 1, "started": time.time()})
    client().expire(key(sid), SESSION_TTL_SECONDS)
    return sid


def load_session(sid: str) -> dict[str, str] | None:
    """Reads the session and counts the view: one read and one write per page view."""
    pipe = client().pipeline(transaction=False)
    pipe.hgetall(key(sid))
    pipe.hincrby(key(sid), "views", 1)
    data, _ = pipe.execute()
    return data or None


def save_answer(sid: str, page: int, answer: str, next_page: int) -> bool:
    pipe = client().pipeline(transaction=False)
    pipe.exists(key(sid))
    pipe.hset(key(sid), mapping={f"answer:{page}": answer, "page": next_page})
    exists, _ = pipe.execute()
    return bool(exists)


def ping() -> bool:
    return bool(client().ping())
