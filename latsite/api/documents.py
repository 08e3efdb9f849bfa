"""A cache of the hot read documents, invalidated whenever the data behind them changes.

Every write to the models the LAT documents are built from bumps a generation token (at once,
and again when the transaction commits, so that a reader racing the commit cannot pin old data
under the new token). A cached document is served only while its token is the current one; a
time-to-live bounds what a cache without shared invalidation (local memory, one per process)
can serve. With Redis the token and the documents are shared by every process, and a hit costs
one round trip (MGET of the token and the document).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction


def _keys(name: str) -> tuple[str, str]:
    database = connection.settings_dict["NAME"]  # test databases never share documents
    return f"docs-generation:{database}", f"doc:{database}:{name}"


def _bump() -> None:
    cache.set(_keys("")[0], uuid.uuid4().hex, timeout=None)


def documents_changed(**_signal_kwargs: Any) -> None:
    """Invalidate every cached document (also a signal receiver for model writes)."""
    _bump()
    transaction.on_commit(_bump)


def cached_document(name: str, build: Callable[[], Any]) -> Any:
    if not settings.DOCUMENT_CACHE_SECONDS:
        return build()
    generation_key, document_key = _keys(name)
    found = cache.get_many([generation_key, document_key])
    generation = found.get(generation_key)
    entry = found.get(document_key)
    if generation is not None and entry is not None and entry[0] == generation:
        return entry[1]
    if generation is None:
        generation = uuid.uuid4().hex
        cache.add(generation_key, generation, timeout=None)
        generation = cache.get(generation_key, generation)
    document = build()
    cache.set(document_key, (generation, document), timeout=settings.DOCUMENT_CACHE_SECONDS)
    return document
