"""Blocking Kubernetes client calls made from the event loop: each runs on a small thread pool
shared by every experiment, and holds a thread only while its request is in flight."""

from __future__ import annotations

import asyncio
import contextvars
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

API_THREADS = 16
T = TypeVar("T")
_pool = ThreadPoolExecutor(max_workers=API_THREADS, thread_name_prefix="k8s-api")


async def call(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """function(*args, **kwargs) on the pool, in the caller's context (Kopf's events need it)."""
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(
        _pool, functools.partial(context.run, function, *args, **kwargs))
