"""The runner app for ASGI servers (Starlette): the Flask app's endpoints and Redis use, some `async def` and
some plain `def`. A plain one runs on the sync thread pool (AnyIO's, 40 threads by default; LOADSTAGE_SYNC_THREADS
sets it, which loadstage does from `threads`), so that the pool's size matters as threads do under gunicorn:
- async, on the event loop: /healthz, /readyz, /metrics, /hello, /readbody, POST /surveys, an answer, and
  /async/delay/PROFILE; Redis through redis.asyncio (under trio, which redis.asyncio does not run on: the sync
  client on the thread pool);
- sync, on the thread pool: a page view, /done and /delay/PROFILE; Redis through the Flask app's store.
RUNNER_DELAY and RUNNER_STALL hold every instrumented request, as in the Flask app: in its thread for a sync
endpoint, on the event loop (without blocking it) for an async one."""

from __future__ import annotations

import functools
import os
import secrets
import time
import urllib.parse

import anyio
import anyio.to_thread
import redis
import redis.asyncio
import sniffio
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from loadstage.api.servers import SYNC_THREADS_ENV  # the runner app ships with loadstage: one name, one place

from . import delays, metrics, store
from .questions import ANSWER_MAX, PAGES, QUESTIONS

_async_clients: dict[int, redis.asyncio.Redis] = {}


def _async_client() -> redis.asyncio.Redis:
    """One pool per worker process, as the sync store has."""
    client = _async_clients.get(os.getpid())
    if client is None:
        # once more on a closed connection: a pooled one whose server restarted may not show it until used
        # (an outage still fails fast: a refused connect is not retried)
        client = _async_clients[os.getpid()] = redis.asyncio.Redis.from_url(
            os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), socket_connect_timeout=0.5,
            socket_timeout=2.0, password=os.environ.get("REDIS_PASSWORD") or None,
            retry=Retry(NoBackoff(), 1, supported_errors=(redis.exceptions.ConnectionError,)))
    return client


async def _pipeline(build) -> list:
    """A Redis pipeline, without a transaction, of the commands `build(pipe)` adds (it returns the pipe)."""
    if sniffio.current_async_library() == "asyncio":
        return await build(_async_client().pipeline(transaction=False)).execute()
    return await anyio.to_thread.run_sync(lambda: build(store.client().pipeline(transaction=False)).execute())


def _observed(route: str, response: Response, started: float, method: str) -> Response:
    metrics.observe(method, route, response.status_code, time.perf_counter() - started)
    return response


def timed_async(route: str):
    """An async endpoint, measured and delayed on the event loop."""
    def wrap(handler):
        @functools.wraps(handler)
        async def endpoint(request: Request) -> Response:
            started = time.perf_counter()
            await anyio.sleep(delays.stall_left() + delays.request_delay())
            return _observed(route, await handler(request), started, request.method)
        return endpoint
    return wrap


def timed_sync(route: str):
    """A plain endpoint: Starlette runs it on the sync thread pool; measured and delayed in its thread."""
    def wrap(handler):
        @functools.wraps(handler)
        def endpoint(request: Request) -> Response:
            started = time.perf_counter()
            delays.wait_out_stall()
            delays.wait_request_delay()
            return _observed(route, handler(request), started, request.method)
        return endpoint
    return wrap


async def healthz(_request: Request) -> Response:
    return PlainTextResponse("ok\n")


async def readyz(_request: Request) -> Response:
    await _pipeline(lambda pipe: pipe.ping())
    return PlainTextResponse("ready\n")


async def metrics_endpoint(_request: Request) -> Response:
    body, content_type = metrics.render()
    return Response(body, headers={"Content-Type": content_type})


@timed_sync("/delay/<profile>")
def delay(request: Request) -> Response:
    seconds = delays.draw(request.path_params["profile"])
    if seconds is None:
        raise HTTPException(404)
    time.sleep(seconds)
    return PlainTextResponse(f"{seconds * 1000:.3f}\n")


@timed_async("/async/delay/<profile>")
async def async_delay(request: Request) -> Response:
    seconds = delays.draw(request.path_params["profile"])
    if seconds is None:
        raise HTTPException(404)
    await anyio.sleep(seconds)
    return PlainTextResponse(f"{seconds * 1000:.3f}\n")


@timed_async("/hello")
async def hello(_request: Request) -> Response:
    return PlainTextResponse("Hello world\n")


@timed_async("/readbody")
async def readbody(request: Request) -> Response:
    return Response(await request.body(), media_type="application/octet-stream")


@timed_async("/surveys")
async def start(_request: Request) -> Response:
    sid = secrets.token_urlsafe(12)
    await _pipeline(lambda pipe: pipe.hset(store.key(sid), mapping={"page": 1, "started": time.time()})
                    .expire(store.key(sid), store.SESSION_TTL_SECONDS))
    return RedirectResponse(f"/surveys/{sid}/pages/1", status_code=303)


def _page(request: Request) -> tuple[str, int]:
    page = request.path_params["page"]
    if not 1 <= page <= PAGES:
        raise HTTPException(404)
    return request.path_params["sid"], page


@timed_sync("/surveys/<sid>/pages/<int:page>")
def show_page(request: Request) -> Response:
    sid, page = _page(request)
    if store.load_session(sid) is None:
        raise HTTPException(404)
    return HTMLResponse(f"<h1>Question {page} of {PAGES}</h1><form method=post>"
                        f"<label>{QUESTIONS[page - 1]}<input name=answer></label>"
                        f"<button>Next</button></form>\n")


@timed_async("/surveys/<sid>/pages/<int:page>")
async def answer(request: Request) -> Response:
    sid, page = _page(request)
    form = urllib.parse.parse_qs((await request.body()).decode("utf-8", "replace"))   # no python-multipart
    text = form.get("answer", [""])[0][:ANSWER_MAX]
    exists, _ = await _pipeline(lambda pipe: pipe.exists(store.key(sid))
                                .hset(store.key(sid), mapping={f"answer:{page}": text, "page": page + 1}))
    if not exists:
        raise HTTPException(404)
    target = f"/surveys/{sid}/pages/{page + 1}" if page < PAGES else f"/surveys/{sid}/done"
    return RedirectResponse(target, status_code=303)


@timed_sync("/surveys/<sid>/done")
def done(request: Request) -> Response:
    if store.load_session(request.path_params["sid"]) is None:
        raise HTTPException(404)
    return HTMLResponse("<h1>Thank you</h1>\n")


async def _redis_down(_request: Request, _error: Exception) -> Response:
    return PlainTextResponse("redis unavailable\n", status_code=503, headers={"Retry-After": "1"})


async def _not_found(_request: Request, error: HTTPException) -> Response:
    return PlainTextResponse(f"{error.detail}\n", status_code=error.status_code)


def _lifespan(_app):
    """The sync thread pool's size, once the event loop runs."""
    class Lifespan:
        async def __aenter__(self):
            if threads := os.environ.get(SYNC_THREADS_ENV):
                anyio.to_thread.current_default_thread_limiter().total_tokens = int(threads)

        async def __aexit__(self, *_exc):
            client = _async_clients.pop(os.getpid(), None)
            if client is not None:
                await client.aclose()
    return Lifespan()


app = Starlette(routes=[
    Route("/healthz", healthz), Route("/readyz", readyz), Route("/metrics", metrics_endpoint),
    Route("/delay/{profile}", delay), Route("/async/delay/{profile}", async_delay),
    Route("/hello", hello), Route("/readbody", readbody, methods=["POST"]),
    Route("/surveys", start, methods=["POST"]),
    Route("/surveys/{sid}/pages/{page:int}", show_page, methods=["GET"]),
    Route("/surveys/{sid}/pages/{page:int}", answer, methods=["POST"]),
    Route("/surveys/{sid}/done", done),
], exception_handlers={redis.exceptions.ConnectionError: _redis_down, redis.exceptions.TimeoutError: _redis_down,
                       HTTPException: _not_found}, lifespan=_lifespan)
