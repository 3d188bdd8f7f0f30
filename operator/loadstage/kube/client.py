"""The Kubernetes client as the operator uses it: configuration, a deadline on every request, a shared
thread pool for the blocking client's calls from the event loop, and what an API error says."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import kubernetes
import urllib3
from kubernetes.client.rest import ApiException

API_THREADS = 16
API_CONNECT_TIMEOUT = 10
API_READ_TIMEOUT = 60
API_RETRY_SECONDS = 10
# What a lost or slow API server raises; the operator retries these, saying so in the status.
API_ERRORS: tuple[type[Exception], ...] = (ApiException, urllib3.exceptions.HTTPError, OSError)
T = TypeVar("T")
_pool = ThreadPoolExecutor(max_workers=API_THREADS, thread_name_prefix="k8s-api")


def load_config(*, in_cluster: bool = True) -> None:
    """In a pod, its ServiceAccount's credentials; elsewhere (or with in_cluster=False) the current kubeconfig."""
    if in_cluster:
        try:
            kubernetes.config.load_incluster_config()
            return
        except kubernetes.config.ConfigException:
            pass
    kubernetes.config.load_kube_config()


def kubeconfig_namespace() -> str:
    """The namespace of the current kubeconfig context (default: default)."""
    return kubernetes.config.list_kube_config_contexts()[1]["context"].get("namespace", "default")


def api_client(configuration: kubernetes.client.Configuration | None = None, *, connect: float = API_CONNECT_TIMEOUT,
               read: float = API_READ_TIMEOUT) -> kubernetes.client.ApiClient:
    """An ApiClient whose every request has a deadline; the kubernetes client has none by default.
    Watches pass their own timeout and keep it."""
    configuration = configuration or kubernetes.client.Configuration.get_default_copy()
    configuration.connection_pool_maxsize = API_THREADS * 2   # the shared calls, and a watch per namespace
    api = kubernetes.client.ApiClient(configuration)
    request: Any = api.rest_client.request

    def with_deadline(*args: Any, _request_timeout: Any = None, **kwargs: Any) -> Any:
        return request(*args, _request_timeout=_request_timeout or (connect, read), **kwargs)
    api.rest_client.request = with_deadline   # type: ignore[method-assign]
    return api


async def call(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """function(*args, **kwargs) on the shared pool, in the caller's context (Kopf's events need it);
    a waiting experiment holds a thread only while its request is in flight."""
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(
        _pool, functools.partial(context.run, function, *args, **kwargs))


def api_message(e: ApiException) -> str:
    try:
        return str(json.loads(e.body or "")["message"])
    except (TypeError, ValueError, KeyError):
        return f"{e.status} {e.reason}"


def retry_message(error: BaseException) -> str:
    if isinstance(error, ApiException):
        said = api_message(error)
        what = f"Kubernetes API error {error.status} {error.reason}" + (
            f": {said}" if said != f"{error.status} {error.reason}" else "")
    else:
        what = f"Kubernetes API unreachable ({type(error).__name__}: {error})"
    return f"{what}; retrying in {API_RETRY_SECONDS}s"
