"""Announce a catalog: register its assets and aliases, and tell listeners about the new ones.

Airflow registers the assets and aliases a DAG declares when it parses the DAG, and calls the listeners'
``on_asset_created`` and ``on_asset_alias_created`` then, before any event. assetflow has no parse step: a
catalog is announced when it starts serving: the local runtime at start; on AWS the first function that builds
its evaluator on a catalog it has not seen (a marker item per catalog digest makes that one GetItem per cold
start). Each asset and alias is registered once, so announcing the same catalog again (or a redeployment)
tells listeners nothing twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from assetflow.core import listeners
from assetflow.core.catalog import Catalog
from assetflow.ports import ListenerBus, PipelineStore

logger = logging.getLogger(__name__)


@dataclass
class Announced:
    """The assets and aliases this announcement registered (the ones it told listeners about)."""

    assets: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)


def announce_catalog(store: PipelineStore, bus: ListenerBus, catalog: Catalog, *, now: datetime) -> Announced:
    """Register every declared asset and alias not registered yet; publish ``AssetCreated``/``AssetAliasCreated``.

    Raises:
        StoreUnavailableError: throttled; announce again (what was registered is not announced twice).
    """
    announced = Announced()
    for uri, asset in catalog.assets.items():
        if store.declare_asset(uri, name=asset.name, now=now):
            bus.publish(listeners.ASSET_CREATED, listeners.asset_created(uri, asset))
            announced.assets.append(uri)
    for name, alias in catalog.aliases.items():
        if store.declare_alias(name, now=now):
            bus.publish(listeners.ASSET_ALIAS_CREATED, listeners.asset_alias_created(alias))
            announced.aliases.append(name)
    logger.info(
        "catalog announced",
        extra={
            "assets": len(announced.assets),
            "aliases": len(announced.aliases),
            "declared": len(catalog.assets),
        },
    )
    return announced


def announce_once(
    store: PipelineStore, bus: ListenerBus, catalog: Catalog, *, digest: str, now: datetime
) -> Announced | None:
    """Announce a catalog unless one with this digest was announced already; None when it was.

    Raises:
        StoreUnavailableError: throttled; the next cold start announces again.
    """
    if store.catalog_announced(digest):
        return None
    announced = announce_catalog(store, bus, catalog, now=now)
    store.mark_catalog_announced(digest, now=now)
    return announced


__all__ = ["Announced", "announce_catalog", "announce_once"]
