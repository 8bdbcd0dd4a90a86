"""The operator views of DESIGN §5 over the store, shared by the HTTP API and the CLI."""

from __future__ import annotations

import base64
import binascii
import contextlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, cast

from assetflow.core.catalog import Catalog
from assetflow.core.conditions import Asset, AssetAlias, Where
from assetflow.core.decision import combine_explains, queue_progress
from assetflow.core.decision import explain as explain_state
from assetflow.core.entries import QueueState
from assetflow.core.events import AssetEvent, format_timestamp, parse_timestamp
from assetflow.core.expectations import asset_health
from assetflow.core.pipeline import Pipeline
from assetflow.core.queues import explain_from_head
from assetflow.core.scheduler import explain_skips, routes_on_content
from assetflow.ports import ExtrasStore, Page, Releases, Store
from assetflow.usecases.checks import newest_check_failed
from assetflow.usecases.expectations import arrival_of
from assetflow.usecases.requests import DEFAULT_LIMIT, RequestError, check_uri, parse_limit, pipeline_of
from assetflow_job.contract import REF_KEY

DEFAULT_RUNS_LIMIT = 50
#: The newest events of a per-partition expected asset that the listing reads for its awaited key.
KEYED_HEALTH_EVENTS = 1000
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


def list_assets(
    store: Store,
    *,
    limit: Limit = DEFAULT_LIMIT,
    token: str | None = None,
    catalog: Catalog | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Assets (``uri``, ``name``, ``created_at``, ``last_event_at``, ``event_count``), by URI, paged.

    With ``catalog``: every declared asset too, with or without events (``event_count`` 0, ``created_at`` and
    ``last_event_at`` null until its first event), and each asset's ``health`` (``fresh``, ``late``,
    ``check_failed``, ``quarantined_input``) from the facts the store keeps: its newest event, its
    ``ExpectedArrival`` (per partition: the awaited key among its 1,000 newest events), whether its newest event
    is held by a failed blocking check that no operator released, and the newest quarantined message of its
    watchers (among the 1,000 newest).

    Raises:
        RequestError: a bad limit or page token.
    """
    size = parse_limit(limit)
    if catalog is None:
        with _paging(token):
            return store.list_assets(limit=size, token=token or None).to_json()
    after = _decode_after(token)
    with _paging(None):
        stored = store.assets_after(after, limit=size + 1)
    by_uri = {a["uri"]: a for a in stored}
    declared = sorted(u for u in catalog.assets if after is None or u > after)[: size + 1]
    uris = sorted(set(by_uri) | set(declared))
    page, more = uris[:size], len(uris) > size
    # A stored asset past the page end may sort after a declared one: the page ends at the size-th URI.
    quarantined = _newest_quarantine(store, catalog)
    moment = now or _utc_now()
    # Only runs' outlet events carry checks: the newest event of each produced asset says whether one holds it.
    produced = {o.uri for p in catalog.pipelines.values() for o in p.outlets if isinstance(o, Asset)}
    releases = cast(Releases, store) if callable(getattr(store, "released_ids", None)) else None
    items = []
    for uri in page:
        known = catalog.assets.get(uri)
        row = by_uri.get(uri) or {
            "uri": uri,
            "name": known.name if known else uri,
            "created_at": None,
            "last_event_at": None,
            "event_count": 0,
        }
        last = parse_timestamp(row["last_event_at"]) if row.get("last_event_at") else None
        expect = getattr(known, "expect", None)
        arrived: frozenset[str] = frozenset()
        if expect is not None and expect.keyed:
            # The awaited key among the newest events (one page): a per-partition deadline's facts.
            status = arrival_of(store, uri, expect, now=moment, max_events=KEYED_HEALTH_EVENTS)
            arrived = frozenset({status.key}) if status.key is not None and not status.late else frozenset()
        held = (
            releases is not None
            and uri in produced
            and row["event_count"] > 0
            and newest_check_failed(store, releases, uri)
        )
        row["health"] = asset_health(
            now=moment,
            expect=expect,
            last_event_at=last,
            arrived_keys=arrived,
            newest_check_failed=held,
            last_quarantined_at=quarantined.get(uri),
        )
        row["declared"] = known is not None
        items.append(row)
    return Page(items, _encode_after(page[-1]) if more and page else None).to_json()


def _newest_quarantine(store: Store, catalog: Catalog) -> dict[str, datetime]:
    """The newest quarantine time of each asset's watchers, among the 1,000 newest quarantined messages."""
    newest: dict[str, datetime] = {}
    items = store.list_quarantine(limit=1000).items
    for item in items:
        watcher = catalog.watchers.get(str(item.get("watcher")))
        if watcher is None or not item.get("at"):
            continue
        for uri in _watched_assets(catalog, watcher[0].name):
            at = parse_timestamp(str(item["at"]))
            if uri not in newest or at > newest[uri]:
                newest[uri] = at
    return newest


def _watched_assets(catalog: Catalog, watcher: str) -> list[str]:
    return [uri for uri, asset in catalog.assets.items() if any(w.name == watcher for w in asset.watchers)]


def _encode_after(uri: str) -> str:
    return base64.urlsafe_b64encode(("after:" + uri).encode()).decode()


def _decode_after(token: str | None) -> str | None:
    if not token:
        return None
    try:
        text = base64.urlsafe_b64decode(token.encode()).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise RequestError("invalid page token; use the 'next' value of the previous page") from exc
    if not text.startswith("after:"):
        raise RequestError("invalid page token; use the 'next' value of the previous page")
    return text.removeprefix("after:")


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


def list_queue(
    store: Store, catalog: Catalog, pipeline_id: str, *, now: datetime | None = None
) -> dict[str, Any]:
    """A pipeline's queued events (``pipeline``, ``queue_key``, ``aliases``, ``event``), oldest first.

    Beside ``items``, ``updated`` and ``required`` say "x of N assets updated": of the assets (and aliases) the
    schedule counts, how many have an eligible queued event (``within`` applies at ``now``). A partition-aware
    pipeline has a queue per key; the figures are those of its most advanced queue, and ``queues`` gives each.

    Raises:
        NotFoundError: no such pipeline in the catalog.
    """
    pipeline = pipeline_of(catalog, pipeline_id)
    moment = now or _utc_now()
    rows: list[dict[str, Any]] = []
    figures: list[dict[str, Any]] = []
    for key in store.queue_keys(pipeline.id, pending_only=False):
        entries = store.read_queue(pipeline.id, key).state.entries
        for entry in sorted(entries, key=lambda e: e.sort_key):
            rows.append(
                {
                    "pipeline": pipeline.id,
                    "queue_key": key or None,
                    "aliases": list(entry.aliases),
                    "event": entry.event.to_json(),
                }
            )
        updated, required = queue_progress(pipeline, entries, now=moment)
        figures.append({"key": key or None, "updated": updated, "required": required, "queued": len(entries)})
    if not figures:
        updated, required = queue_progress(pipeline, (), now=moment)
        figures.append({"key": None, "updated": updated, "required": required, "queued": 0})
    best = max(figures, key=lambda f: (f["updated"] / f["required"] if f["required"] else 0.0, f["queued"]))
    doc = Page(rows, None).to_json()
    doc["updated"], doc["required"] = best["updated"], best["required"]
    if pipeline.partitioned:
        doc["queues"] = figures
    return doc


def explain(
    store: Store,
    catalog: Catalog,
    pipeline_id: str,
    *,
    now: datetime | None = None,
    extras: ExtrasStore | None = None,
) -> dict[str, Any]:
    """Why the pipeline runs or waits now: DESIGN §5's explain JSON, from the decision the evaluator takes.

    The queues, the active runs and the paused flag are read from the store; ``held_runs`` adds how many
    operator-made runs (manual, replayed, backfilled) wait for a slot, and ``late`` the assets of the schedule
    that missed their expected arrival (:func:`late_inputs`). For pipelines that can skip events, ``skipped``
    lists the newest ones they did (``recent_skips``; ``extras`` reads large extras back).

    Raises:
        NotFoundError: no such pipeline in the catalog.
    """
    pipeline = pipeline_of(catalog, pipeline_id)
    moment = now or _utc_now()
    gate = store.pipeline_gate(pipeline.id)
    keys = store.queue_keys(pipeline.id, pending_only=False) if pipeline.partitioned else [""]
    nodes = list(pipeline.condition.iter_nodes())
    uses_aliases = any(isinstance(n, AssetAlias) for n in nodes)
    uses_wheres = any(isinstance(n, Where) for n in nodes)
    docs = []
    for key in keys:
        # The head alone answers for most conditions; an order (then) or a where's misses need the entries.
        head = store.read_queue_head(pipeline.id, key)
        doc = explain_from_head(pipeline, head, active_runs=gate.active, now=moment, paused=gate.paused)
        if doc is None:
            entries = store.decision_entries(
                pipeline.id, key, head.generation, aliases=uses_aliases, wheres=uses_wheres
            )
            state = QueueState(pipeline.id, key, head.version, entries, head.pending_ticks, head.last_tick)
            doc = explain_state(pipeline, state, active_runs=gate.active, now=moment, paused=gate.paused)
        docs.append(doc)
    if not docs:
        state = QueueState(pipeline.id)
        docs.append(explain_state(pipeline, state, active_runs=gate.active, now=moment, paused=gate.paused))
    result = combine_explains(pipeline, docs)
    result["held_runs"] = len(store.held_runs(pipeline.id))
    result["late"] = late_inputs(store, catalog, pipeline, now=moment)
    if _can_skip(pipeline):
        result["skipped"] = recent_skips(store, catalog, pipeline, extras=extras)
        _mark_misses(result.get("condition"), result["skipped"])
    return result


def late_inputs(store: Store, catalog: Catalog, pipeline: Pipeline, *, now: datetime) -> list[dict[str, Any]]:
    """The assets the schedule names that missed their expected arrival's last deadline and are still late.

    Each is ``{"uri", "deadline", "partition_key"}`` (the key a per-partition expectation waits for).
    """
    late: list[dict[str, Any]] = []
    uris = dict.fromkeys(u for u in (getattr(n, "uri", None) for n in pipeline.condition.iter_nodes()) if u)
    for uri in uris:
        known = catalog.assets.get(str(uri))
        if known is None or known.expect is None:
            continue
        status = arrival_of(store, known.uri, known.expect, now=now, max_events=KEYED_HEALTH_EVENTS)
        if status.late and status.deadline is not None:
            late.append(
                {"uri": known.uri, "deadline": format_timestamp(status.deadline), "partition_key": status.key}
            )
    return late


#: Newest events per asset that explain routes again to say why they did not reach the pipeline.
RECENT_EVENTS = 10


def _can_skip(pipeline: Pipeline) -> bool:
    """Whether the pipeline may record events without queueing them (patterns, keys, partitions, versions)."""
    schedule = pipeline.schedule
    return (
        pipeline.skip_unchanged
        or pipeline.partitioned
        or any(isinstance(n, Where) for n in schedule.condition.iter_nodes())
    )


def recent_skips(
    store: Store, catalog: Catalog, pipeline: Pipeline, *, extras: ExtrasStore | None = None
) -> list[dict[str, Any]]:
    """The newest events of the pipeline's assets that it recorded but did not queue, each with why.

    For a where-node the skip names the patterns the event's extra missed (``missed``: key and pattern). An
    event whose extra is stored by reference is judged on the whole extra (read back with ``extras``), as the
    evaluator judged it; without ``extras`` it is left out rather than misjudged.
    """
    uris: dict[str, None] = {}
    for node in pipeline.condition.iter_nodes():
        if isinstance(node, AssetAlias):
            uris.update(dict.fromkeys(store.alias_assets(node.name)[:RECENT_EVENTS]))
    uris.update(dict.fromkeys(a.uri for a in pipeline.condition.iter_assets()))
    events: list[tuple[AssetEvent, tuple[str, ...]]] = []
    for uri in uris:
        consumers = catalog.consumers(uri, store.aliases_of(uri) if catalog.alias_consumers else [])
        aliases = next((a for p, a in consumers if p.id == pipeline.id), None)
        if aliases is None:
            continue
        page = store.list_events(uri, limit=RECENT_EVENTS)
        for doc in page.items:
            event = AssetEvent.from_json(doc)
            if REF_KEY in event.extra and routes_on_content(pipeline):
                if extras is None:
                    continue
                event = replace(event, extra=extras.load(event.extra))
            events.append((event, aliases))
    consumed: dict[tuple[str, str, str], frozenset[str]] = {}
    if pipeline.skip_unchanged:
        consumed = store.consumed_versions(
            [(pipeline.id, e.asset, e.version) for e, _ in events if e.version is not None]
        )
        # an event a run took is no skip, though its version now reads as consumed
        taken = frozenset().union(*consumed.values()) if consumed else frozenset()
        events = [(e, a) for e, a in events if e.id not in taken]
    return explain_skips(pipeline, events, consumed_versions=consumed)


def _mark_misses(node: Any, skipped: list[dict[str, Any]]) -> None:
    """Give each where-node of the explain tree ``recent_misses``: the skipped events that missed its pattern."""
    if not isinstance(node, dict):
        return
    if node.get("op") == "where":
        node["recent_misses"] = [
            s["event_id"] for s in skipped if any(m["key"] == node.get("key") for m in s.get("missed", ()))
        ]
    for child in node.get("children", ()):
        _mark_misses(child, skipped)


def _utc_now() -> datetime:
    return datetime.now(UTC)


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


def show_run(store: Store, run_id: str, catalog: Catalog | None = None) -> dict[str, Any]:
    """A run with its ``triggering_asset_events`` and the ``produced_asset_events`` of its outlets.

    ``produced_asset_events`` maps each asset URI to the events the run produced, in (timestamp, id)
    order (empty until the run succeeds): lineage both ways (DESIGN §3.9). The events of its pipeline's
    declared outlets are found from the run's end in ``catalog`` (without it, or once the pipeline is gone
    from it, only its alias additions are).

    Raises:
        NotFoundError: no such run.
    """
    run = store.get_run(run_id)
    doc = run.to_json()
    produced: dict[str, list[dict[str, Any]]] = {}
    pipeline = catalog.pipelines.get(run.pipeline) if catalog is not None else None
    outlets = pipeline.asset_outlets if pipeline is not None else ()
    for event in store.events_produced_by(run_id, outlets=outlets, ended_at=run.ended_at):  # oldest first
        produced.setdefault(event["asset"], []).append(event)
    doc["produced_asset_events"] = dict(sorted(produced.items()))
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


__all__ = ["explain", "list_assets", "list_events", "list_quarantine", "list_queue", "list_runs", "show_run"]
