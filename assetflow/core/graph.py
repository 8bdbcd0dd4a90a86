"""The asset graph as text: watchers → assets → pipelines → outlet assets, in Mermaid or Graphviz DOT."""

from __future__ import annotations

import json
import re

from assetflow.core.catalog import Catalog
from assetflow.core.conditions import (
    Asset,
    AssetAlias,
    AssetAll,
    AssetAny,
    AssetRef,
    AtLeast,
    Condition,
    Failed,
    Late,
    NoAssets,
    Then,
    Where,
)
from assetflow.core.jsonvalue import thaw_json
from assetflow.core.schedules import (
    AssetAndTimeSchedule,
    CronPartitionTimetable,
    PartitionedAssetSchedule,
    Schedule,
)
from assetflow.core.watchers import describe_source


def condition_text(condition: Condition, names: dict[str, str] | None = None) -> str:
    """A condition written as users write it: ``(a & b) | at_least(c, 3)``, with asset names where known."""
    names = names or {}
    if isinstance(condition, NoAssets):
        return "no assets"
    if isinstance(condition, Asset):
        return names.get(condition.uri, condition.uri)
    if isinstance(condition, AssetAlias):
        return f"alias:{condition.name}"
    if isinstance(condition, AssetRef):
        return repr(condition)
    if isinstance(condition, Where):
        pattern = json.dumps(thaw_json(condition.pattern), sort_keys=True, separators=(",", ":"))
        return f"{condition_text(condition.of, names)}.where({pattern})"
    if isinstance(condition, Failed):
        return f"{condition_text(condition.asset, names)}.failed()"
    if isinstance(condition, Late):
        return f"late({condition_text(condition.asset, names)})"
    if isinstance(condition, AtLeast):
        return f"at_least({condition_text(condition.of, names)}, {condition.n})"
    if isinstance(condition, Then):
        within = "" if condition.within is None else f", within={condition.within}"
        return f"{_wrapped(condition.first, names)}.then({condition_text(condition.second, names)}{within})"
    assert isinstance(condition, AssetAll | AssetAny)  # noqa: S101  (the tree has only these nodes)
    joiner = " & " if isinstance(condition, AssetAll) else " | "
    return joiner.join(_wrapped(c, names) for c in condition.children)


def _wrapped(condition: Condition, names: dict[str, str]) -> str:
    text = condition_text(condition, names)
    return f"({text})" if isinstance(condition, AssetAll | AssetAny) else text


def schedule_text(schedule: Schedule, names: dict[str, str] | None = None) -> str:
    """A schedule in one line: its condition and its time part (``manual only`` for neither)."""
    parts = [condition_text(schedule.condition, names)] if schedule.has_assets else []
    if schedule.time is not None:
        parts.append(f"cron {schedule.time.source} {schedule.time.timezone}")
    if isinstance(schedule, AssetAndTimeSchedule):
        return " at ".join(parts)
    return " or ".join(parts) or "manual only"


_PREFIX = {"watcher": "w", "asset": "a", "alias": "l", "pipeline": "p"}


def _node_ids(catalog: Catalog) -> dict[tuple[str, str], str]:
    ids: dict[tuple[str, str], str] = {}
    for kind, keys in (
        ("watcher", catalog.watchers),
        ("asset", catalog.assets),
        ("alias", catalog.aliases),
        ("pipeline", catalog.pipelines),
    ):
        for n, key in enumerate(keys):
            ids[(kind, key)] = f"{_PREFIX[kind]}{n}_{re.sub(r'[^A-Za-z0-9]', '_', key)[:40]}"
    return ids


def _edges(catalog: Catalog, ids: dict[tuple[str, str], str]) -> list[tuple[str, str, str]]:
    edges: list[tuple[str, str, str]] = []
    for name in catalog.watchers:
        for uri in catalog.watcher_assets.get(name, (catalog.watchers[name][1],)):
            edges.append((ids[("watcher", name)], ids[("asset", uri)], ""))
    for pid, pipeline in catalog.pipelines.items():
        target = ids[("pipeline", pid)]
        for asset in dict.fromkeys(pipeline.condition.iter_assets()):
            edges.append((ids[("asset", asset.uri)], target, ""))
        for alias in dict.fromkeys(pipeline.condition.iter_aliases()):
            edges.append((ids[("alias", alias.name)], target, ""))
        for outlet in pipeline.outlets:
            key = ("asset", outlet.uri) if isinstance(outlet, Asset) else ("alias", outlet.name)
            edges.append((target, ids[key], "on success"))
    return edges


def _labels(catalog: Catalog) -> dict[tuple[str, str], str]:
    names = {uri: a.name for uri, a in catalog.assets.items()}
    labels: dict[tuple[str, str], str] = {}
    for name, (watcher, _) in catalog.watchers.items():
        labels[("watcher", name)] = f"{name}\n{describe_source(watcher.source)}"
    for uri, asset in catalog.assets.items():
        labels[("asset", uri)] = uri if asset.name == uri else f"{asset.name}\n{uri}"
    for name in catalog.aliases:
        labels[("alias", name)] = f"alias {name}"
    for pid, pipeline in catalog.pipelines.items():
        schedule = pipeline.schedule
        lines = [pid, condition_text(pipeline.condition, names) if schedule.has_assets else "manual only"]
        if schedule.time is not None:
            joiner = {"asset_and_time": "at ", "asset_or_time": "or "}.get(schedule.kind, "")
            lines[1:] = [lines[1]] if schedule.has_assets else []
            lines.append(f"{joiner}cron {schedule.time.source} {schedule.time.timezone}")
        if isinstance(schedule, PartitionedAssetSchedule):
            keyed = f", by {schedule.key_field}" if schedule.key_field else ""
            lines.append(f"partitioned, {schedule.mapper.grain}{keyed}")
        if isinstance(schedule, CronPartitionTimetable):
            lines.append(f"partition keys {schedule.key_format}")
        for name in ("debounce", "max_wait", "within"):
            value = getattr(pipeline, name)
            if value is not None:
                lines.append(f"{name} {value}")
        if not pipeline.batch:
            lines.append("one run per event")
        if pipeline.max_active_runs is not None:
            lines.append(f"max {pipeline.max_active_runs} active")
        labels[("pipeline", pid)] = "\n".join(lines)
    return labels


def to_mermaid(catalog: Catalog) -> str:
    """A Mermaid flowchart of the catalog."""
    ids = _node_ids(catalog)
    shapes = {
        "watcher": ('[/"', '"/]'),
        "asset": ('["', '"]'),
        "alias": ('(["', '"])'),
        "pipeline": ('{{"', '"}}'),
    }
    lines = ["flowchart LR"]
    for (kind, key), label in _labels(catalog).items():
        text = label.replace('"', "#quot;").replace("\n", "<br/>")
        opening, closing = shapes[kind]
        lines.append(f"  {ids[(kind, key)]}{opening}{text}{closing}")
    for src, dst, label in _edges(catalog, ids):
        arrow = f" -->|{label}| " if label else " --> "
        lines.append(f"  {src}{arrow}{dst}")
    return "\n".join(lines) + "\n"


def to_dot(catalog: Catalog) -> str:
    """A Graphviz DOT digraph of the catalog."""
    ids = _node_ids(catalog)
    shapes = {"watcher": "cds", "asset": "box", "alias": "box, style=rounded", "pipeline": "hexagon"}
    lines = ["digraph assetflow {", "  rankdir=LR;", '  node [fontname="Helvetica"];']
    for (kind, key), label in _labels(catalog).items():
        text = label.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        lines.append(f'  {ids[(kind, key)]} [label="{text}", shape={shapes[kind]}];')
    for src, dst, label in _edges(catalog, ids):
        attrs = f' [label="{label}"]' if label else ""
        lines.append(f"  {src} -> {dst}{attrs};")
    lines.append("}")
    return "\n".join(lines) + "\n"
