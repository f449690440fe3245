"""Readiness of a serving process (/readyz): the index answers for the default collection, the DB
answers, and no answer has been in progress longer than HYPA_ANSWER_STALL_S.

Liveness (/healthz) needs no check: if the event loop answers, the process is alive. Readiness is
what a load balancer or Kubernetes uses to send traffic only to replicas that can answer questions,
so each check exercises the real dependency (a read of the index, a `SELECT 1` on the database) and
turns any failure into False; the endpoint names the failing check. "answering" covers what those
checks cannot see: a pipeline that hangs (core/answer_watch.py) while the index and database are fine.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from core.index import ChunkIndex

log = logging.getLogger(__name__)


class Pingable(Protocol):
    def ping(self) -> bool: ...


def index_ready(index: ChunkIndex, collection: str) -> bool:
    """The collection is loaded (embedded) / queryable (Weaviate) and holds at least one document."""
    try:
        return bool(index.documents(collection))
    except Exception as exc:  # noqa: BLE001 - readiness answers, it never raises
        log.warning("readiness: index check for collection %r failed: %s", collection, exc)
        return False


def database_ready(store: Pingable) -> bool:
    try:
        return bool(store.ping())
    except Exception as exc:  # noqa: BLE001
        log.warning("readiness: database check failed: %s", exc)
        return False


def answering_ready(watch: Any, stall_s: float) -> bool:
    """False while the oldest answer in progress has run longer than `stall_s` (the pipeline is stuck)."""
    oldest = watch.oldest_seconds()
    if oldest > stall_s:
        log.warning(
            "readiness: an answer has been in progress for %.0f s (HYPA_ANSWER_STALL_S=%g); %d in progress",
            oldest, stall_s, watch.in_progress(),
        )
        return False
    return True


def readiness(components: Any) -> dict[str, bool]:
    """{"index": ..., "database": ..., "answering": ...} for `bot.wiring.Components` (uses .index,
    .store, .answer_watch, .settings)."""
    checks: dict[str, bool] = {}
    try:
        index = components.index  # built on first use: Weaviate connects here
    except Exception as exc:  # noqa: BLE001 - e.g. Weaviate unreachable: not ready, say which check
        log.warning("readiness: cannot open the index: %s", exc)
        checks["index"] = False
    else:
        checks["index"] = index_ready(index, components.settings.collection)
    try:
        store = components.store
    except Exception as exc:  # noqa: BLE001 - e.g. the database URL is wrong: not ready, say why
        log.warning("readiness: cannot open the database: %s", exc)
        checks["database"] = False
    else:
        checks["database"] = database_ready(store)
    checks["answering"] = answering_ready(components.answer_watch, components.settings.answer_stall_s)
    return checks


def readiness_check(components: Any) -> Callable[[], dict[str, bool]]:
    """The callable `bot.http_app.build_http_app(readiness=...)` expects."""
    return lambda: readiness(components)
