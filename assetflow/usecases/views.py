"""The operator views of DESIGN §5 over the store, shared by the HTTP API and the CLI."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from assetflow.core.catalog import Catalog
from assetflow.ports import Page, Store
from assetflow.usecases.requests import DEFAULT_LIMIT, RequestError, check_uri, parse_limit, pipeline_of

DEFAULT_RUNS_LIMIT = 50
_RUN_READERS = 8

#: A page size as an option gives it (int) or a query parameter does (text); None for the default.
Limit = int | str | None


@contextlib.contextmanager
def _paging(token: str | None) -> Iterator[None]:
    # The store refuses a token it did not give out (InvalidPageTokenError, a ValueError), as a bad limit.
    try:
        yield
    except ValueError as exc:
        raise RequestError(str(exc)) from exc


def list_assets(store: Store, *, limit: Limit = DEFAULT_LIMIT, token: str | None = None) -> dict[str, Any]:
    """Assets (``uri``, ``name``, ``created_at``, ``last_event_at``, ``event_count``), by URI, paged.

    Raises:
        RequestError: a bad limit or page token.
    """
    size = parse_limit(limit)
    with _paging(token):
        return store.list_assets(limit=size, token=token or None).to_json()


def list_events(
    store: Store, uri: object, *, limit: Limit = DEFAULT_LIMIT, token: str | None = None
) -> dict[str, Any]:
    """An asset's events, newest first, paged (an asset without events gives an empty page).

    Raises:
        RequestError: a bad URI, limit or page token.
    """
    asset, size = check_uri(uri), parse_limit(limit)
    with _paging(token):
        return store.list_events(asset, limit=size, token=token or None).to_json()


def list_queue(store: Store, catalog: Catalog, pipeline_id: str) -> dict[str, Any]:
    """A pipeline's queued events (``pipeline``, ``queue_key``, ``aliases``, ``event``), oldest first.

    Raises:
        NotFoundError: no such pipeline in the catalog.
    """
    pipeline = pipeline_of(catalog, pipeline_id)
    return Page(store.list_queue(pipeline.id), None).to_json()


def list_runs(
    store: Store,
    catalog: Catalog | None,
    pipeline_id: str | None = None,
    *,
    limit: Limit = DEFAULT_RUNS_LIMIT,
    token: str | None = None,
) -> dict[str, Any]:
    """Runs, newest first, of one pipeline (checked against the catalog when given) or of all, paged.

    Each run carries its ``triggering_asset_events``, so that list items have the shape of DESIGN §5.

    Raises:
        NotFoundError: no such pipeline in the catalog.
        RequestError: a bad limit or page token.
    """
    if pipeline_id is not None and catalog is not None:
        pipeline_of(catalog, pipeline_id)
    size = parse_limit(limit, DEFAULT_RUNS_LIMIT)
    with _paging(token):
        page = store.list_runs(pipeline_id, limit=size, token=token or None)
    ids = [item["run_id"] for item in page.items]
    # One read per run for its triggering events; a few at a time keeps a page of 1000 in seconds.
    with ThreadPoolExecutor(max_workers=_RUN_READERS) as pool:
        runs = list(pool.map(lambda run_id: store.get_run(run_id).to_json(), ids))
    return Page(runs, page.next).to_json()


def show_run(store: Store, run_id: str) -> dict[str, Any]:
    """A run with its ``triggering_asset_events`` and the ``produced_asset_events`` of its outlets.

    ``produced_asset_events`` maps each asset URI to the events the run produced, in (timestamp, id)
    order (empty until the run succeeds): lineage both ways (DESIGN §3.9).

    Raises:
        NotFoundError: no such run.
    """
    doc = store.get_run(run_id).to_json()
    produced: dict[str, list[dict[str, Any]]] = {}
    for event in store.events_produced_by(run_id):
        produced.setdefault(event["asset"], []).append(event)
    doc["produced_asset_events"] = {
        uri: sorted(events, key=lambda e: (e["timestamp"], e["id"]))
        for uri, events in sorted(produced.items())
    }
    return doc


def list_quarantine(
    store: Store, *, limit: Limit = DEFAULT_LIMIT, token: str | None = None
) -> dict[str, Any]:
    """Rejected messages (``at``, ``watcher``, ``reason``, ``body``, ``facts``, ``identity``), newest first.

    Raises:
        RequestError: a bad limit or page token.
    """
    size = parse_limit(limit)
    with _paging(token):
        return store.list_quarantine(limit=size, token=token or None).to_json()


__all__ = ["list_assets", "list_events", "list_quarantine", "list_queue", "list_runs", "show_run"]
