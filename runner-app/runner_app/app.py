"""Flask questionnaire: POST /surveys starts a session, GET shows a page, POST answers it
and redirects to the next one. Every request reads and writes Redis. Beside it, the uWSGI-vs-gunicorn
study's two endpoints, which touch no Redis: GET /hello and POST /readbody (echoes its body)."""

from __future__ import annotations

import time

import redis
from flask import Flask, Response, abort, g, redirect, request

from . import delays, metrics, store
from .questions import ANSWER_MAX, PAGES, QUESTIONS


def create_app() -> Flask:
    app = Flask(__name__)

    @app.before_request
    def _start_timer():
        g.started = time.perf_counter()
        if request.url_rule is None or request.url_rule.rule not in metrics.UNINSTRUMENTED:
            delays.wait_out_stall()
            delays.wait_request_delay()

    @app.after_request
    def _observe(response):
        rule = request.url_rule.rule if request.url_rule else "unmatched"
        if rule not in metrics.UNINSTRUMENTED:
            metrics.observe(request.method, rule, response.status_code, time.perf_counter() - g.started)
        return response

    @app.errorhandler(redis.exceptions.ConnectionError)
    @app.errorhandler(redis.exceptions.TimeoutError)
    def _redis_down(_error):
        return Response("redis unavailable\n", status=503, mimetype="text/plain",
                        headers={"Retry-After": "1"})

    @app.get("/healthz")
    def healthz():
        return "ok\n"

    @app.get("/readyz")
    def readyz():
        store.ping()
        return "ready\n"

    @app.get("/metrics")
    def metrics_endpoint():
        body, content_type = metrics.render()
        return Response(body, mimetype=None, content_type=content_type)

    @app.get("/delay/<profile>")
    def delay(profile: str):
        """Sleeps for a delay drawn from a named, seeded distribution (for fidelity benchmarks)."""
        seconds = delays.draw(profile)
        if seconds is None:
            abort(404)
        time.sleep(seconds)
        return f"{seconds * 1000:.3f}\n"

    @app.get("/hello")
    def hello():
        """The uWSGI-vs-gunicorn study's "hello": no Redis, no work."""
        return Response("Hello world\n", mimetype="text/plain")

    @app.post("/readbody")
    def readbody():
        """The same study's "readbody": reads the whole request body (70 KB there) and echoes it."""
        return Response(request.get_data(), mimetype="application/octet-stream")

    @app.post("/surveys")
    def start():
        return redirect(f"/surveys/{store.start_session()}/pages/1", code=303)

    @app.get("/surveys/<sid>/pages/<int:page>")
    def show_page(sid: str, page: int):
        if not 1 <= page <= PAGES:
            abort(404)
        session = store.load_session(sid)
        if session is None:
            abort(404)
        return (f"<h1>Question {page} of {PAGES}</h1><form method=post>"
                f"<label>{QUESTIONS[page - 1]}<input name=answer></label>"
                f"<button>Next</button></form>\n")

    @app.post("/surveys/<sid>/pages/<int:page>")
    def answer(sid: str, page: int):
        if not 1 <= page <= PAGES:
            abort(404)
        text = request.form.get("answer", "")[:ANSWER_MAX]
        if not store.save_answer(sid, page, text, page + 1):
            abort(404)
        target = f"/surveys/{sid}/pages/{page + 1}" if page < PAGES else f"/surveys/{sid}/done"
        return redirect(target, code=303)

    @app.get("/surveys/<sid>/done")
    def done(sid: str):
        if store.load_session(sid) is None:
            abort(404)
        return "<h1>Thank you</h1>\n"

    return app


app = create_app()
