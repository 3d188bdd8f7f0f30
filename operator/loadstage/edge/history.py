"""The history's handler: each finished experiment recorded into the chart's database (history.url), once by its
uid, retried while the database is down; registered with Kopf as `loadstage operator` imports it."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import kopf
import kubernetes

from loadstage.api.names import API_GROUP, API_VERSION, FINISHED, PLURAL
from loadstage.engine.clock import now
from loadstage.history.locations import Location
from loadstage.history.records import cluster_document, record_of
from loadstage.history.store import HistoryError, Store
from loadstage.history.trends import check
from loadstage.history.views import trend
from loadstage.kube.client import API_ERRORS, retry_message
from loadstage.kube.status import record as status_record
from loadstage.kube.stored_results import first_repeat_artifacts

HISTORY_RETRY_SECONDS = 10   # a history database that is down: tried again this often
RECORD_ERRORS: tuple[type[Exception], ...] = (HistoryError, *API_ERRORS)


def _history_due(status, memo: kopf.Memo, **_) -> bool:
    """A finished experiment that ran a stage, not yet in the history the chart names."""
    return memo.config.history is not None and status.get("phase") in FINISHED and \
        any(v.get("stages") for v in status.get("variants") or []) and not (status.get("history") or {}).get("recorded")


@kopf.daemon(API_GROUP, API_VERSION, PLURAL, id="history", when=_history_due, backoff=HISTORY_RETRY_SECONDS,
             cancellation_timeout=10)
def record_history(body: kopf.Body, namespace: Any, name: str, spec: Any, memo: kopf.Memo, logger: kopf.Logger,
                   **_):
    """A finished experiment kept in the history, once by its uid: also after an operator restart, or by a second
    replica (the database keeps the first), and once the database is back where it was down."""
    where: Location = memo.config.history
    try:
        ran = [(v["index"] + 1, s["stage"]) for v in body.status.get("variants") or [] for s in v.get("stages") or []]
        artifacts = first_repeat_artifacts(kubernetes.client.CoreV1Api(memo.api), namespace, name, ran)
        document = cluster_document({**copy.deepcopy(dict(body)), "status": copy.deepcopy(dict(body.status))},
                                    artifacts)
        image = (spec.get("target") or {}).get("image") or memo.config.defaults.runner
        made = record_of(document, uid=body.metadata.uid, source="cluster", image=image)
        with Store(where) as store:
            added = store.record(made, now())
            runs = store.runs(made.run.series)
    except RECORD_ERRORS as e:
        message = f"history: {e if isinstance(e, HistoryError) else retry_message(e)}; tried again in " \
                  f"{HISTORY_RETRY_SECONDS} s"
        logger.warning(message)
        kopf.event(body, type="Warning", reason="HistoryFailed", message=message)
        with contextlib.suppress(*API_ERRORS):
            status_record(memo.api, namespace, name, history={"recorded": False, "error": message})
        raise kopf.TemporaryError(message, delay=HISTORY_RETRY_SECONDS) from None
    said = trend(check(runs), sum(r.run.phase == "Succeeded" for r in runs))
    status_record(memo.api, namespace, name, history={"recorded": True, "at": now(), "trend": said})
    message = f"{'recorded' if added else 'already recorded'} in {where.shown}; its series' trend: {said}"
    kopf.event(body, type="Normal", reason="Recorded", message=message)
    logger.info("history: %s", message)
