"""Listener events: what Airflow 3's asset listener hooks receive, as the details of EventBridge events.

Airflow calls four hooks of its listener plugins (``airflow.listeners.spec.asset``); assetflow puts one event on
the stack's bus for each, with the detail type below and a detail shaped as the hook's argument:

- ``on_asset_created(asset)`` → ``AssetCreated`` ``{"asset": ASSET}``, when an asset is first registered:
  Airflow at DAG parse; here when the catalog that declares it is announced (the local runtime at start, a
  deployment on AWS), or at the first event of an asset that no catalog declares;
- ``on_asset_alias_created(asset_alias)`` → ``AssetAliasCreated`` ``{"asset_alias": {"name", "group"}}``, when
  an alias is first registered (the same moments);
- ``on_asset_changed(asset)`` → ``AssetChanged`` ``{"asset": ASSET}``, for each asset event when it is recorded
  (Airflow's ``register_asset_change``);
- ``on_asset_event_emitted(asset_event)`` → ``AssetEventEmitted`` ``{"asset": ASSET, "extra", "source_dag_id",
  "source_task_id", "source_run_id", "source_map_index", "source_aliases", "partition_key", "partition_date",
  "event"}``, right after ``AssetChanged`` for the same event.

``ASSET`` is ``{"name", "uri", "group", "extra"}`` as Airflow's serialised asset. ``source_dag_id`` is the
producing pipeline and ``source_run_id`` its run (None for events from watchers and the API), ``source_task_id``
is always None (a pipeline is one job, not tasks) and ``source_map_index`` -1 (Airflow's "not mapped"),
``source_aliases`` the aliases a run's alias outlet added the asset to. ``event`` is assetflow's own event JSON
(its id, timestamp and source), which Airflow's hooks do not carry. Each detail also says ``"kind"``, the hook's
name without ``on_``.

One more, which Airflow has no hook for (apache/airflow #48475 asks for it): ``AssetLate``
``{"asset": ASSET, "deadline", "since", "partition_key", "expected"}`` when an asset misses a deadline of its
``ExpectedArrival`` (``partition_key``: the key a per-partition expectation waited for), once per deadline.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from assetflow.core.conditions import Asset, AssetAlias
from assetflow.core.events import AssetEvent, format_timestamp
from assetflow.core.expectations import ArrivalStatus
from assetflow.core.jsonvalue import thaw_json

ASSET_CREATED = "AssetCreated"
ASSET_ALIAS_CREATED = "AssetAliasCreated"
ASSET_CHANGED = "AssetChanged"
ASSET_EVENT_EMITTED = "AssetEventEmitted"
ASSET_LATE = "AssetLate"
DETAIL_TYPES = (ASSET_CREATED, ASSET_ALIAS_CREATED, ASSET_CHANGED, ASSET_EVENT_EMITTED, ASSET_LATE)
#: Airflow's ``map_index`` of a task that is not mapped.
NOT_MAPPED = -1


def asset_json(uri: str, declared: Asset | None = None) -> dict[str, Any]:
    """Airflow's serialised asset: the declared one's name, group and extra, else the URI as its name."""
    if declared is None:
        return {"name": uri, "uri": uri, "group": "asset", "extra": {}}
    return {
        "name": declared.name,
        "uri": declared.uri,
        "group": declared.group,
        "extra": thaw_json(declared.extra),
    }


def alias_json(alias: AssetAlias | str) -> dict[str, Any]:
    """Airflow's serialised alias: ``{"name", "group"}``."""
    if isinstance(alias, AssetAlias):
        return {"name": alias.name, "group": alias.group}
    return {"name": alias, "group": "asset"}


def asset_created(uri: str, declared: Asset | None = None) -> dict[str, Any]:
    """The detail of ``AssetCreated`` (``on_asset_created(asset)``)."""
    return {"kind": "asset_created", "asset": asset_json(uri, declared)}


def asset_alias_created(alias: AssetAlias | str) -> dict[str, Any]:
    """The detail of ``AssetAliasCreated`` (``on_asset_alias_created(asset_alias)``)."""
    return {"kind": "asset_alias_created", "asset_alias": alias_json(alias)}


def asset_changed(uri: str, declared: Asset | None = None) -> dict[str, Any]:
    """The detail of ``AssetChanged`` (``on_asset_changed(asset)``)."""
    return {"kind": "asset_changed", "asset": asset_json(uri, declared)}


def asset_event_emitted(
    event: AssetEvent,
    declared: Asset | None = None,
    aliases: Iterable[AssetAlias | str] = (),
    *,
    known_aliases: Mapping[str, AssetAlias] | None = None,
) -> dict[str, Any]:
    """The detail of ``AssetEventEmitted`` (``on_asset_event_emitted(asset_event)``).

    ``aliases`` default to the ones the event's source names (a run's alias outlet), described as
    ``known_aliases`` (the catalog's) declares them.
    """
    source: Mapping[str, Any] = event.source
    from_run = source.get("type") == "run"
    named = list(aliases) or list(source.get("aliases") or ())
    if known_aliases:
        named = [known_aliases.get(a, a) if isinstance(a, str) else a for a in named]
    return {
        "kind": "asset_event_emitted",
        "asset": asset_json(event.asset, declared),
        "extra": thaw_json(event.extra),
        "source_dag_id": source.get("pipeline") if from_run else None,
        "source_task_id": None,
        "source_run_id": source.get("run_id") if from_run else None,
        "source_map_index": NOT_MAPPED,
        "source_aliases": [alias_json(a) for a in named],
        "partition_key": event.partition_key,
        "partition_date": None,
        "event": event.to_json(),
    }


def asset_late(uri: str, declared: Asset | None, status: ArrivalStatus) -> dict[str, Any]:
    """The detail of ``AssetLate``: the asset missed ``status.deadline`` (and, keyed, ``status.key``).

    Raises:
        ValueError: the status is not a missed deadline.
    """
    if not status.late or status.deadline is None:
        raise ValueError("only a missed deadline is announced as AssetLate")
    expect = declared.expect if declared is not None else None
    return {
        "kind": "asset_late",
        "asset": asset_json(uri, declared),
        "deadline": format_timestamp(status.deadline),
        "since": None if status.since is None else format_timestamp(status.since),
        "partition_key": status.key,
        "expected": None if expect is None else expect.to_json(),
    }


__all__ = [
    "ASSET_ALIAS_CREATED",
    "ASSET_CHANGED",
    "ASSET_CREATED",
    "ASSET_EVENT_EMITTED",
    "ASSET_LATE",
    "DETAIL_TYPES",
    "NOT_MAPPED",
    "alias_json",
    "asset_alias_created",
    "asset_changed",
    "asset_created",
    "asset_event_emitted",
    "asset_json",
    "asset_late",
]
