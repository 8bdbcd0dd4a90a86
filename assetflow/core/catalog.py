"""The catalog: every definition validated as a whole, compiled to a versioned JSON document and indexed."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from assetflow.core.conditions import Asset, AssetAlias, AssetRef, Failed, Late
from assetflow.core.errors import CatalogError, DefinitionError, DocumentError
from assetflow.core.expectations import ExpectedArrival
from assetflow.core.jsonvalue import thaw_json
from assetflow.core.pipeline import Pipeline
from assetflow.core.watchers import AssetWatcher, KafkaTopic, S3ObjectCreated, SqsQueue, source_from_json

DOCUMENT_FORMAT = "assetflow.catalog"
#: Version 2: asset groups and expectations, alias groups, the event operators, manual / time / asset-and-time /
#: cron-partition schedules, pipeline windows and skip_unchanged.
DOCUMENT_VERSION = 2


@dataclass(frozen=True)
class Diagnostic:
    """One finding of catalog validation."""

    severity: Literal["error", "warning"]
    subject: str
    message: str

    def __str__(self) -> str:
        return f"{self.severity}: {self.subject}: {self.message}"


@dataclass(frozen=True)
class Definition:
    """A declared object and where it was declared (a file or module), for messages."""

    value: object
    origin: str = "<definitions>"


def _source_identity(watcher: AssetWatcher) -> tuple[str, ...]:
    source = watcher.source
    if not isinstance(source, SqsQueue | KafkaTopic):
        # An EventBridge rule or a Kinesis mapping of its own gets every matching event or record: two
        # watchers of one bucket, pattern or stream never split its messages between them.
        return (source.to_json()["type"], watcher.name)
    if isinstance(source, SqsQueue):
        # an existing queue is known by its full ARN: queues of one name in other accounts or regions differ
        return ("sqs", source.arn or f"stack:{source.name}")
    cluster = source.cluster.to_json() if source.cluster else {"type": "default"}
    return ("kafka", repr(sorted(cluster.items())), source.topic)


class Catalog:
    """Assets, aliases, watchers and pipelines, validated together, with an index from asset to consumers."""

    def __init__(
        self,
        *,
        assets: Mapping[str, Asset],
        aliases: Mapping[str, AssetAlias],
        pipelines: Mapping[str, Pipeline],
        warnings: Iterable[Diagnostic] = (),
    ) -> None:
        self.assets = dict(sorted(assets.items()))
        self.aliases = dict(sorted(aliases.items()))
        self.pipelines = dict(sorted(pipelines.items()))
        # One watcher may feed several assets (as several Airflow assets share one watcher's trigger): its
        # first asset (by URI) stays in ``watchers`` for callers that know one; ``watcher_assets`` has them all.
        fed: dict[str, list[str]] = {}
        found: dict[str, AssetWatcher] = {}
        for asset in self.assets.values():
            for w in asset.watchers:
                found.setdefault(w.name, w)
                fed.setdefault(w.name, []).append(asset.uri)
        self.watcher_assets: dict[str, tuple[str, ...]] = {name: tuple(fed[name]) for name in sorted(fed)}
        self.watchers: dict[str, tuple[AssetWatcher, str]] = {
            name: (found[name], uris[0]) for name, uris in self.watcher_assets.items()
        }
        self.warnings = tuple(warnings)
        by_asset: dict[str, set[str]] = {}
        by_alias: dict[str, set[str]] = {}
        by_failure: dict[str, set[str]] = {}
        for pipeline in self.pipelines.values():
            for asset in pipeline.condition.iter_assets():
                by_asset.setdefault(asset.uri, set()).add(pipeline.id)
            for node in pipeline.condition.iter_nodes():
                if isinstance(node, Failed) and isinstance(node.asset, Asset):
                    by_failure.setdefault(node.asset.uri, set()).add(pipeline.id)
            for alias in pipeline.condition.iter_aliases():
                by_alias.setdefault(alias.name, set()).add(pipeline.id)
        self.asset_consumers = {uri: tuple(sorted(ids)) for uri, ids in sorted(by_asset.items())}
        self.alias_consumers = {name: tuple(sorted(ids)) for name, ids in sorted(by_alias.items())}
        #: Pipelines with ``a.failed()`` per asset URI: a failed producer of ``a`` routes failure entries to them.
        self.failure_consumer_ids = {uri: tuple(sorted(ids)) for uri, ids in sorted(by_failure.items())}

    # ---- building and validating -------------------------------------------------------------------

    @classmethod
    def build(cls, definitions: Iterable[Definition | object]) -> Catalog:
        """Validate definitions as a whole and build the catalog.

        Raises:
            CatalogError: one or more errors; every one is listed, not only the first.

        """
        defs = [d if isinstance(d, Definition) else Definition(d) for d in definitions]
        errors: list[Diagnostic] = []
        warnings: list[Diagnostic] = []

        pipelines: dict[str, Pipeline] = {}
        origins: dict[str, str] = {}
        declared_assets: list[tuple[Asset, str]] = []
        for d in defs:
            if isinstance(d.value, Pipeline):
                pipeline = d.value
                if pipeline.id in pipelines and pipelines[pipeline.id] is not pipeline:
                    errors.append(
                        Diagnostic(
                            "error",
                            f"pipeline {pipeline.id!r}",
                            f"declared twice ({origins[pipeline.id]} and {d.origin}); pipeline ids must be unique",
                        )
                    )
                    continue
                pipelines[pipeline.id] = pipeline
                origins[pipeline.id] = d.origin
                for asset in pipeline.condition.iter_assets():
                    declared_assets.append((asset, d.origin))
                declared_assets.extend(
                    (o, d.origin) for o in (*pipeline.outlets, *pipeline.inlets) if isinstance(o, Asset)
                )
            elif isinstance(d.value, Asset):
                declared_assets.append((d.value, d.origin))

        assets = cls._merge_assets(declared_assets, errors, warnings)
        pipelines = cls._resolve_refs(pipelines, assets, errors)
        cls._check_watchers(assets, errors)
        aliases = cls._check_aliases(pipelines, errors)
        cls._check_producers(pipelines, assets, warnings)
        cls._check_watched_outlets(pipelines, assets, warnings)
        cls._check_outcomes(pipelines, assets, errors)
        cls._check_loops(pipelines, errors, warnings)
        if errors:
            raise CatalogError([str(e) for e in errors])
        return cls(assets=assets, aliases=aliases, pipelines=pipelines, warnings=warnings)

    @staticmethod
    def _merge_assets(
        declared: list[tuple[Asset, str]], errors: list[Diagnostic], warnings: list[Diagnostic]
    ) -> dict[str, Asset]:
        merged: dict[str, Asset] = {}
        for asset, origin in declared:
            known = merged.get(asset.uri)
            if known is None:
                merged[asset.uri] = asset
                continue
            subject = f"asset {asset.uri!r}"
            named, name = known.named, known.name
            if asset.named:
                if known.named and known.name != asset.name:
                    errors.append(
                        Diagnostic(
                            "error",
                            subject,
                            f"declared with two names, {known.name!r} and {asset.name!r} ({origin})",
                        )
                    )
                named, name = True, asset.name
            group = known.group
            if asset.group != "asset":
                if known.group not in ("asset", asset.group):
                    errors.append(
                        Diagnostic(
                            "error",
                            subject,
                            f"declared in two groups, {known.group!r} and {asset.group!r} ({origin})",
                        )
                    )
                group = asset.group
            expect = known.expect
            if asset.expect is not None:
                if known.expect is not None and known.expect != asset.expect:
                    errors.append(
                        Diagnostic("error", subject, f"declared with two different expect= ({origin})")
                    )
                expect = asset.expect
            extra = dict(known.extra)
            if asset.extra and known.extra and dict(asset.extra) != dict(known.extra):
                warnings.append(
                    Diagnostic(
                        "warning",
                        subject,
                        f"declared with different extras; the first is kept ({origin})",
                    )
                )
            elif asset.extra:
                extra = thaw_json(asset.extra)
            # de-duplicate by equality, not by name: _check_watchers reports two watchers of one name
            watchers: list[AssetWatcher] = []
            for watcher in (*known.watchers, *asset.watchers):
                if watcher not in watchers:
                    watchers.append(watcher)
            merged[asset.uri] = Asset(
                name=name,
                uri=asset.uri if named else None,
                group=group,
                extra=thaw_json(extra),
                watchers=watchers,
                expect=expect,
            )
        by_name: dict[str, str] = {}
        for asset in merged.values():
            other = by_name.setdefault(asset.name, asset.uri)
            if other != asset.uri:
                errors.append(
                    Diagnostic(
                        "error",
                        f"asset name {asset.name!r}",
                        f"names two assets ({other!r} and {asset.uri!r}); asset names are unique, as in Airflow",
                    )
                )
        return merged

    @staticmethod
    def _resolve_refs(
        pipelines: Mapping[str, Pipeline], assets: Mapping[str, Asset], errors: list[Diagnostic]
    ) -> dict[str, Pipeline]:
        """The pipelines with every ``Asset.ref(...)`` replaced by the declared asset it names."""
        by_name = {a.name: a for a in assets.values()}

        def find(ref: AssetRef) -> Asset:
            found = by_name.get(ref.ref_name) if ref.ref_name is not None else assets.get(ref.ref_uri or "")
            if found is None:
                raise DefinitionError(repr(ref))
            return found

        resolved: dict[str, Pipeline] = {}
        for pid, pipeline in pipelines.items():
            unknown = [
                repr(ref) for ref in dict.fromkeys(pipeline.condition.iter_refs()) if _missing(ref, find)
            ]
            if unknown:
                # reported here, and left out of the checks that follow (they would only repeat it)
                errors.append(
                    Diagnostic(
                        "error",
                        f"pipeline {pid!r}",
                        f"{', '.join(unknown)} names no declared asset; declare it (an Asset(...) in the "
                        "definitions, or in a pipeline's schedule, outlets or inlets) or fix the reference",
                    )
                )
                continue
            resolved[pid] = pipeline.resolved(find)
        return resolved

    @staticmethod
    def _check_outcomes(
        pipelines: Mapping[str, Pipeline], assets: Mapping[str, Asset], errors: list[Diagnostic]
    ) -> None:
        """``late(a)`` needs an expectation on ``a``; ``a.failed()`` needs a pipeline that produces ``a``."""
        produced = {o.uri for p in pipelines.values() for o in p.outlets if isinstance(o, Asset)}
        for pipeline in pipelines.values():
            for node in pipeline.condition.iter_nodes():
                known = assets.get(node.uri) if isinstance(node, Failed | Late) else None
                if isinstance(node, Late) and known is not None and known.expect is None:
                    errors.append(
                        Diagnostic(
                            "error",
                            f"pipeline {pipeline.id!r}",
                            f"late({node.uri!r}) needs an expectation: declare the asset with "
                            "expect=ExpectedArrival(cron, grace=...)",
                        )
                    )
                if isinstance(node, Failed) and known is not None and node.uri not in produced:
                    errors.append(
                        Diagnostic(
                            "error",
                            f"pipeline {pipeline.id!r}",
                            f"{node.uri!r}.failed() can never hold: no pipeline has the asset in its outlets, so no "
                            "run can fail to produce it",
                        )
                    )

    @staticmethod
    def _check_watchers(assets: Mapping[str, Asset], errors: list[Diagnostic]) -> None:
        by_name: dict[str, tuple[AssetWatcher, str]] = {}
        by_source: dict[tuple[str, ...], str] = {}
        for asset in assets.values():
            for watcher in asset.watchers:
                other = by_name.get(watcher.name)
                # The same watcher on several assets is one source feeding them all: one mapping, one event
                # per asset for each message. Two different watchers may not share a name.
                if other is not None and other[0] != watcher:
                    errors.append(
                        Diagnostic(
                            "error",
                            f"watcher {watcher.name!r}",
                            f"name used twice (assets {other[1]!r} and {asset.uri!r})",
                        )
                    )
                by_name[watcher.name] = (watcher, asset.uri)
                identity = _source_identity(watcher)
                holder = by_source.get(identity)
                if holder is not None and holder != watcher.name:
                    errors.append(
                        Diagnostic(
                            "error",
                            f"watcher {watcher.name!r}",
                            f"watches the same {identity[0]} source as watcher {holder!r}; the two would split its "
                            "messages between them. To feed several assets from one source, attach the same "
                            "AssetWatcher object to each of them (one mapping, one event per asset)",
                        )
                    )
                by_source[identity] = watcher.name

    @staticmethod
    def _check_aliases(pipelines: Mapping[str, Pipeline], errors: list[Diagnostic]) -> dict[str, AssetAlias]:
        produced = {o.name for p in pipelines.values() for o in p.outlets if isinstance(o, AssetAlias)}
        aliases: dict[str, AssetAlias] = {}
        for pipeline in pipelines.values():
            used = [
                *pipeline.condition.iter_aliases(),
                *(i for i in pipeline.inlets if isinstance(i, AssetAlias)),
            ]
            for alias in used:
                if alias.name not in produced:
                    errors.append(
                        Diagnostic(
                            "error",
                            f"pipeline {pipeline.id!r}",
                            f"uses alias {alias.name!r}, which no pipeline declares in "
                            "outlets=[AssetAlias(...)], so it can never resolve",
                        )
                    )
            for outlet in (*used, *pipeline.outlets):
                if isinstance(outlet, AssetAlias):
                    aliases[outlet.name] = outlet
        return aliases

    @staticmethod
    def _check_watched_outlets(
        pipelines: Mapping[str, Pipeline], assets: Mapping[str, Asset], warnings: list[Diagnostic]
    ) -> None:
        """Warn when a pipeline writes an outlet under a prefix that an S3 watcher watches.

        The files its job writes there would become events (of an asset that may trigger it again).
        """
        watched = [
            (w.name, w.source)
            for a in assets.values()
            for w in a.watchers
            if isinstance(w.source, S3ObjectCreated)
        ]
        for pipeline in pipelines.values():
            for outlet in pipeline.outlets:
                if not isinstance(outlet, Asset) or not outlet.uri.startswith("s3://"):
                    continue
                bucket, _, path = outlet.uri.removeprefix("s3://").partition("/")
                for name, source in dict(watched).items():
                    if bucket == source.bucket and (
                        path.startswith(source.prefix) or source.prefix.startswith(path)
                    ):
                        warnings.append(
                            Diagnostic(
                                "warning",
                                f"pipeline {pipeline.id!r}",
                                f"its outlet {outlet.uri!r} lies under s3://{source.bucket}/{source.prefix}, which "
                                f"watcher {name!r} watches: files the job writes there "
                                + (f"ending in {source.suffix!r} " if source.suffix else "")
                                + "become events too; write outlets elsewhere or narrow the watcher's prefix or suffix",
                            )
                        )

    @staticmethod
    def _check_producers(
        pipelines: Mapping[str, Pipeline], assets: Mapping[str, Asset], warnings: list[Diagnostic]
    ) -> None:
        produced = {o.uri for p in pipelines.values() for o in p.outlets if isinstance(o, Asset)}
        for pipeline in pipelines.values():
            for asset in dict.fromkeys(pipeline.condition.iter_assets()):
                if asset.uri not in produced and not assets[asset.uri].watchers:
                    warnings.append(
                        Diagnostic(
                            "warning",
                            f"pipeline {pipeline.id!r}",
                            f"asset {asset.uri!r} has no watcher and no producing pipeline; only the API or "
                            "`assetflow events emit` can update it",
                        )
                    )

    @staticmethod
    def _self_sustaining(pipelines: Mapping[str, Pipeline], with_aliases: bool) -> set[str]:
        """Pipelines that can keep triggering each other from their own outlets alone (a greatest fixpoint).

        Without aliases: certainly (whatever the outlet events' content and order); with aliases: possibly
        (content and order may match, a producing run may fail).

        Linear in the pipelines: every pipeline starts alive; one whose condition is not fed by the outlets of
        the live pipelines of its partitioning dies, and only the pipelines naming an outlet that thereby has
        no live producer left are judged again (each outlet dies once). Events of partitioned runs only
        trigger partition-aware pipelines, and events of other runs have no partition key, so partition-aware
        pipelines ignore them (DESIGN §3.8): one world per partitioning.
        """

        def outlets(pipeline: Pipeline) -> set[tuple[str, str]]:
            found = {("asset", o.uri) for o in pipeline.outlets if isinstance(o, Asset)}
            if with_aliases:
                found |= {("alias", o.name) for o in pipeline.outlets if isinstance(o, AssetAlias)}
            return found

        def named(pipeline: Pipeline) -> set[tuple[str, str]]:
            found: set[tuple[str, str]] = set()
            for node in pipeline.condition.iter_nodes():
                if isinstance(node, AssetAlias):
                    found.add(("alias", node.name))
                elif isinstance(getattr(node, "uri", None), str):  # assets, and failed()/late() of one
                    found.add(("asset", str(getattr(node, "uri", ""))))
            return found

        producers: dict[tuple[bool, str, str], int] = {}
        available: dict[bool, tuple[set[str], set[str]]] = {flag: (set(), set()) for flag in (False, True)}
        consumers: dict[tuple[bool, str, str], list[str]] = {}
        for pid, pipeline in pipelines.items():
            for kind, name in outlets(pipeline):
                key = (pipeline.partitioned, kind, name)
                producers[key] = producers.get(key, 0) + 1
                available[pipeline.partitioned][kind == "alias"].add(name)
            for kind, name in named(pipeline):
                consumers.setdefault((pipeline.partitioned, kind, name), []).append(pid)
        alive = set(pipelines)
        todo = list(pipelines)
        while todo:
            pid = todo.pop()
            if pid not in alive:
                continue
            pipeline = pipelines[pid]
            assets, aliases = available[pipeline.partitioned]
            # The sets change as pipelines die; ``feeds`` only asks them what they hold (no copy per call).
            if pipeline.condition.feeds(
                cast(frozenset[str], assets), cast(frozenset[str], aliases), sure=not with_aliases
            ):
                continue
            alive.discard(pid)
            for kind, name in outlets(pipeline):
                key = (pipeline.partitioned, kind, name)
                producers[key] -= 1
                if not producers[key]:
                    available[pipeline.partitioned][kind == "alias"].discard(name)
                    todo += [c for c in consumers.get(key, ()) if c in alive]
        return alive

    @classmethod
    def _check_loops(
        cls, pipelines: Mapping[str, Pipeline], errors: list[Diagnostic], warnings: list[Diagnostic]
    ) -> None:
        certain = cls._self_sustaining(pipelines, with_aliases=False)
        if certain:
            errors.append(
                Diagnostic(
                    "error",
                    "pipelines " + ", ".join(sorted(certain)),
                    "their outlets satisfy their own schedules with no other input: an endless loop. Give each "
                    "schedule an input from outside the loop (an & with another asset) or remove the outlet",
                )
            )
        possible = cls._self_sustaining(pipelines, with_aliases=True) - certain
        if possible:
            warnings.append(
                Diagnostic(
                    "warning",
                    "pipelines " + ", ".join(sorted(possible)),
                    "may trigger each other endlessly through the aliases they add to at run time",
                )
            )

    # ---- the hot path ------------------------------------------------------------------------------

    def consumers(
        self, asset_uri: str, resolved_aliases: Iterable[str] = ()
    ) -> list[tuple[Pipeline, tuple[str, ...]]]:
        """Pipelines whose schedule names the asset directly or through one of its resolved aliases.

        The work is proportional to the asset's consumers, not to the catalog's size.
        """
        found: dict[str, set[str]] = {pid: set() for pid in self.asset_consumers.get(asset_uri, ())}
        for alias in resolved_aliases:
            for pid in self.alias_consumers.get(alias, ()):
                found.setdefault(pid, set()).add(alias)
        return [(self.pipelines[pid], tuple(sorted(found[pid]))) for pid in sorted(found)]

    def failure_consumers(self, asset_uri: str) -> tuple[str, ...]:
        """The pipelines whose schedule has ``a.failed()`` of this asset."""
        return self.failure_consumer_ids.get(asset_uri, ())

    # ---- the document ------------------------------------------------------------------------------

    def to_document(self) -> dict[str, Any]:
        """The versioned JSON document (see docs/contracts.md)."""
        return {
            "format": DOCUMENT_FORMAT,
            "version": DOCUMENT_VERSION,
            "assets": {
                uri: {
                    "uri": uri,
                    "name": a.name,
                    "group": a.group,
                    "extra": thaw_json(a.extra),
                    "expect": None if a.expect is None else a.expect.to_json(),
                }
                for uri, a in self.assets.items()
            },
            "aliases": {name: {"name": name, "group": alias.group} for name, alias in self.aliases.items()},
            "watchers": {
                name: {
                    "name": name,
                    "asset": uri,
                    **(
                        {"assets": list(self.watcher_assets[name])}
                        if len(self.watcher_assets[name]) > 1
                        else {}
                    ),
                    "source": w.source.to_json(),
                }
                for name, (w, uri) in self.watchers.items()
            },
            "pipelines": {pid: p.to_json() for pid, p in self.pipelines.items()},
            "index": {
                "assets": {uri: list(ids) for uri, ids in self.asset_consumers.items()},
                "aliases": {name: list(ids) for name, ids in self.alias_consumers.items()},
            },
        }

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> Catalog:
        """Rebuild a catalog from its document; ``from_document(d).to_document() == d``.

        Raises:
            DocumentError: wrong format or version, malformed content, or an index that does not match.

        """
        if not isinstance(doc, Mapping) or doc.get("format") != DOCUMENT_FORMAT:
            raise DocumentError(f"not an assetflow catalog document (format must be {DOCUMENT_FORMAT!r})")
        if doc.get("version") != DOCUMENT_VERSION:
            raise DocumentError(
                f"catalog document version {doc.get('version')!r} is not supported (this assetflow reads "
                f"version {DOCUMENT_VERSION}); recompile it with `assetflow catalog --json`"
            )
        try:
            watchers: dict[str, list[AssetWatcher]] = {}
            for name, w in doc["watchers"].items():
                watcher = AssetWatcher(name, source_from_json(w["source"]))
                for uri in w.get("assets") or [w["asset"]]:
                    watchers.setdefault(uri, []).append(watcher)
            assets = {
                uri: Asset(
                    name=a["name"],
                    uri=a["uri"],
                    group=a["group"],
                    extra=a["extra"],
                    watchers=watchers.get(uri, []),
                    expect=None if a["expect"] is None else ExpectedArrival.from_json(a["expect"]),
                )
                for uri, a in doc["assets"].items()
            }
            aliases = {name: AssetAlias(name, group=a["group"]) for name, a in doc["aliases"].items()}
            pipelines = {pid: Pipeline.from_json(p) for pid, p in doc["pipelines"].items()}
        except (KeyError, TypeError, AttributeError, DefinitionError) as exc:
            raise DocumentError(f"malformed catalog document: {exc!r}") from exc
        catalog = cls(assets=assets, aliases=aliases, pipelines=pipelines)
        if catalog.to_document() != dict(doc):
            raise DocumentError(
                "catalog document does not match its own content (edited by hand?); recompile it"
            )
        return catalog


def _missing(ref: AssetRef, find: Callable[[AssetRef], Asset]) -> bool:
    try:
        find(ref)
    except DefinitionError:
        return True
    return False


def is_kafka(watcher: AssetWatcher) -> bool:
    """Whether a watcher reads a Kafka topic."""
    return isinstance(watcher.source, KafkaTopic)
