"""Asset conditions: assets, aliases, and the trees built from them with ``&``, ``|`` and the event operators.

Leaves select queue entries: :class:`Asset` (real events of one asset), :class:`AssetAlias` (real events of
any asset the alias resolved to), ``a.where(PATTERN)`` (real events whose extra matched the pattern when they
were routed), ``a.failed()`` (failure entries: a run that should have produced ``a`` failed) and ``late(a)``
(late entries: ``a`` missed an expected arrival). ``at_least(x, n)`` and ``x.then(y, within=)`` count and
order what leaves select; ``&`` and ``|`` combine truth.

Every node evaluates on an :class:`EvalView`: the queue's eligible entries, indexed by *selector key*
(``a:URI``, ``l:ALIAS``, ``w:WHERE-KEY``, ``f:URI``, ``t:URI``). The scheduler's ``QueueView`` holds every
entry; a queue head's ``SummaryView`` holds only counts and times per key and raises :class:`Undecidable`
where that is not enough (an order between events), so the evaluator reads the queue then.

A stream node (a leaf, ``at_least``, ``then``) also has *times*: the (timestamp, id) of each entry at which
it became true, oldest first. ``at_least(x, n)`` is true from x's n-th time on; ``x.then(y, within=W)`` at
each time of y that comes after a time of x, no more than W later.
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from assetflow.core.errors import DefinitionError, DocumentError
from assetflow.core.expectations import ExpectedArrival
from assetflow.core.filters import validate_pattern
from assetflow.core.jsonvalue import freeze_json, thaw_json
from assetflow.core.uri import normalize_uri
from assetflow.core.watchers import AssetWatcher

_ALIAS_NAME_MAX = 200
#: Airflow's limit on asset names, URIs and groups.
_IDENTIFIER_MAX = 1500

#: An entry's place in time: (timestamp, id), the order of DESIGN §3.4.
SortKey = tuple[datetime, str]


class Undecidable(Exception):  # noqa: N818  (a signal, not an error: the caller reads the queue instead)
    """The view cannot judge this node (a head summary has no order between events): read the queue."""


class EvalView(Protocol):
    """What a condition reads: the eligible queue entries per selector key."""

    def present(self, key: str) -> bool:
        """Whether at least one eligible entry has this key."""
        ...

    def count(self, key: str) -> int:
        """How many eligible entries have this key."""
        ...

    def times(self, key: str) -> Sequence[SortKey]:
        """The (timestamp, id) of the eligible entries with this key, oldest first."""
        ...

    def missed(self, where_key: str, target_key: str) -> int:
        """How many eligible entries of a where-node's target did not match its pattern."""
        ...


def _identifier(value: object, what: str, *, limit: int = _IDENTIFIER_MAX) -> str:
    """Airflow's identifier rule: a non-blank ASCII string of at most ``limit`` characters."""
    if not isinstance(value, str) or not value.strip():
        raise DefinitionError(f"{what} must be a non-empty string")
    if len(value) > limit:
        raise DefinitionError(f"{what} cannot exceed {limit} characters")
    if not value.isascii():
        raise DefinitionError(f"{what} must only consist of ASCII characters")
    return value


def _dedupe(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


class Condition:
    """A node of a schedule's condition tree; combine nodes with ``&`` and ``|``."""

    __slots__ = ()

    #: The node's name in documents and explain trees.
    op = ""

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; cannot set {key!r}")

    def __delattr__(self, key: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; cannot delete {key!r}")

    def __and__(self, other: object) -> AssetAll:
        if not isinstance(other, Condition):
            return NotImplemented
        return AssetAll(self, other)

    def __or__(self, other: object) -> AssetAny:
        if not isinstance(other, Condition):
            return NotImplemented
        return AssetAny(self, other)

    # ---- evaluation --------------------------------------------------------------------------------

    def holds(self, view: EvalView) -> bool:
        """Whether the condition holds on ``view``.

        Raises:
            Undecidable: the view cannot judge it (only a head summary raises this).

        """
        return self._holds(view)

    def evaluate(self, assets: Iterable[str] | frozenset[str], aliases: Iterable[str] = ()) -> bool:
        """Whether the condition *can* hold when ``assets`` (URIs) and ``aliases`` (names) have queued entries.

        Exact for trees of assets and aliases. The event operators need more than names (counts, content,
        order, kinds), so for them this answers optimistically: ``at_least``, ``where``, ``then``,
        ``failed`` and ``late`` count as true when the assets or aliases they name are present. A false
        answer is therefore always final (the queue cannot satisfy the condition); a true one for a tree
        with event operators means "read the queue and decide on a :class:`EvalView`".
        """
        return self._could(frozenset(assets), frozenset(aliases))

    def _holds(self, view: EvalView) -> bool:
        raise NotImplementedError

    def _could(self, assets: frozenset[str], aliases: frozenset[str]) -> bool:
        raise NotImplementedError

    def feeds(self, assets: frozenset[str], aliases: frozenset[str], *, sure: bool) -> bool:
        """Whether outlet events of ``assets``/``aliases`` alone satisfy the condition (the loop check).

        ``sure``: whatever their content (``where`` and ``then`` never are); otherwise possibly (``failed``
        when a feeder produces the asset, as its failure would; ``late`` never, a producer's event answers it).
        """
        raise NotImplementedError

    # ---- explain -----------------------------------------------------------------------------------

    def report(self, view: EvalView) -> dict[str, Any]:
        """The explain tree of this node on ``view``: ``{"op", "value", "children"}`` or a leaf's fields."""
        raise NotImplementedError

    def needs(self, view: EvalView) -> list[str]:
        """A smallest list of subjects (URIs, ``alias:NAME``) whose entries would make the node hold."""
        return [] if self._holds(view) else self._needs_more(view)

    def _needs_more(self, view: EvalView) -> list[str]:
        raise NotImplementedError

    def subjects(self) -> Iterator[tuple[str, str]]:
        """``(selector key, subject)`` of every asset or alias whose real events the tree counts."""
        for child in self.children_nodes():
            yield from child.subjects()

    # ---- structure ---------------------------------------------------------------------------------

    def children_nodes(self) -> tuple[Condition, ...]:
        """The node's direct children."""
        return ()

    def iter_nodes(self) -> Iterator[Condition]:
        """Every node of the tree, depth first, parents before children."""
        yield self
        for child in self.children_nodes():
            yield from child.iter_nodes()

    def iter_assets(self) -> Iterator[Asset]:
        """Every asset named in the tree, depth first, duplicates included."""
        for child in self.children_nodes():
            yield from child.iter_assets()

    def iter_aliases(self) -> Iterator[AssetAlias]:
        """Every alias named in the tree, depth first, duplicates included."""
        for child in self.children_nodes():
            yield from child.iter_aliases()

    def iter_refs(self) -> Iterator[AssetRef]:
        """Every unresolved ``Asset.ref(...)`` in the tree."""
        for child in self.children_nodes():
            yield from child.iter_refs()

    def resolve(self, resolver: Callable[[AssetRef], Asset]) -> Condition:
        """The same tree with every ``Asset.ref(...)`` replaced by ``resolver(ref)``."""
        raise NotImplementedError

    def is_any_of_leaves(self) -> bool:
        """Whether every single entry that reaches the queue satisfies the condition on its own."""
        raise NotImplementedError

    def to_json(self) -> dict[str, Any]:
        """The condition as the catalog document's ``COND`` shape."""
        raise NotImplementedError


# ---- streams and leaves ------------------------------------------------------------------------------


class _Stream(Condition):
    """A node with times: a leaf, ``at_least`` or ``then``; it can be counted and ordered."""

    __slots__ = ()

    def times(self, view: EvalView) -> Sequence[SortKey]:
        """When the node became true, per entry, oldest first."""
        raise NotImplementedError

    def tally(self, view: EvalView) -> int:
        """How many times the node became true (for a leaf: its eligible entries)."""
        return len(self.times(view))

    def then(self, other: Condition, within: timedelta | None = None) -> Then:
        """True once an entry of ``other`` comes after one of this node, no more than ``within`` later."""
        return Then(self, other, within)


class _Leaf(_Stream):
    """A node that selects queue entries by one selector key."""

    __slots__ = ()

    @property
    def key(self) -> str:
        """The selector key of the entries it selects."""
        raise NotImplementedError

    def _holds(self, view: EvalView) -> bool:
        return view.present(self.key)

    def times(self, view: EvalView) -> Sequence[SortKey]:
        """The eligible entries' (timestamp, id), oldest first."""
        return view.times(self.key)

    def tally(self, view: EvalView) -> int:
        """The number of eligible entries."""
        return view.count(self.key)

    def is_any_of_leaves(self) -> bool:
        """A leaf: every entry routed for it satisfies it."""
        return True

    def resolve(self, resolver: Callable[[AssetRef], Asset]) -> Condition:
        """A leaf holds no reference."""
        return self


class _Selector(_Leaf):
    """A leaf over real asset events: an asset, an alias, or a reference to an asset."""

    __slots__ = ()

    @property
    def subject(self) -> str:
        """How explain names it: the URI, or ``alias:NAME``."""
        raise NotImplementedError

    def where(self, pattern: Mapping[str, Any]) -> Where:
        """Only events whose extra matches ``pattern`` (an EventBridge-style pattern) count."""
        return Where(self, pattern)

    def subjects(self) -> Iterator[tuple[str, str]]:
        """This selector."""
        yield (self.key, self.subject)

    def _needs_more(self, view: EvalView) -> list[str]:
        return [self.subject]

    def report(self, view: EvalView) -> dict[str, Any]:
        """``{"op", "value", "uri" | "name", "queued"}``."""
        return {"op": self.op, "value": self._holds(view), **self._names(), "queued": view.count(self.key)}

    def _names(self) -> dict[str, str]:
        raise NotImplementedError


def _asset_from(kwargs: dict[str, Any]) -> Asset:
    return Asset(**kwargs)


class Asset(_Selector):
    """A logical data entity identified by its normalised URI; ``name``, ``group`` and ``extra`` never change it.

    Airflow 3's constructor: ``Asset(name, uri)``; one argument alone is both name and URI (``Asset("s3://b/k")``,
    ``Asset(name="orders")``, ``Asset(uri="s3://b/k")``).

    Raises:
        AssetUriError: the URI breaks a rule (the message says how to fix it).
        DefinitionError: the name, group, extra, watchers or expectation are invalid.

    """

    __slots__ = ("_named", "expect", "extra", "group", "name", "uri", "watchers")

    op = "asset"
    uri: str
    name: str
    group: str
    extra: Mapping[str, Any]
    watchers: tuple[AssetWatcher, ...]
    expect: ExpectedArrival | None
    _named: bool

    def __init__(
        self,
        name: str | None = None,
        uri: str | None = None,
        *,
        group: str = "asset",
        extra: Mapping[str, Any] | None = None,
        watchers: Sequence[AssetWatcher] = (),
        expect: ExpectedArrival | None = None,
    ) -> None:
        if name is None and uri is None:
            raise DefinitionError("Asset() needs a name or a uri: Asset(name, uri), as in Airflow 3")
        named = name is not None and uri is not None
        text_uri = uri if uri is not None else name
        text_name = name if name is not None else uri
        if not isinstance(text_uri, str):
            raise DefinitionError(f"Asset uri must be a string, not {type(text_uri).__name__}")
        normalized = normalize_uri(text_uri)
        what = f"asset {normalized!r}"
        _identifier(text_name, f"{what}: name")
        _identifier(group, f"{what}: group")
        if extra is not None and not isinstance(extra, Mapping):
            raise DefinitionError(f"{what}: extra must be a dict, not {type(extra).__name__}")
        if isinstance(watchers, AssetWatcher | str) or not isinstance(watchers, Iterable):
            raise DefinitionError(f"{what}: watchers must be a list of AssetWatcher objects")
        watchers = tuple(watchers)
        for watcher in watchers:
            if not isinstance(watcher, AssetWatcher):
                raise DefinitionError(
                    f"{what}: watchers must be AssetWatcher objects, not {type(watcher).__name__}"
                )
        if expect is not None and not isinstance(expect, ExpectedArrival):
            raise DefinitionError(
                f"{what}: expect must be an ExpectedArrival(...), not {type(expect).__name__}"
            )
        object.__setattr__(self, "uri", normalized)
        object.__setattr__(self, "name", text_name)
        object.__setattr__(self, "group", group)
        object.__setattr__(self, "extra", freeze_json(dict(extra or {}), f"{what} extra"))
        object.__setattr__(self, "watchers", watchers)
        object.__setattr__(self, "expect", expect)
        object.__setattr__(self, "_named", named)

    @classmethod
    def ref(cls, *, name: str | None = None, uri: str | None = None) -> AssetRef:
        """A reference to an asset declared elsewhere, resolved when the catalog is built (Airflow's AssetRef)."""
        return AssetRef(name=name, uri=uri)

    @property
    def named(self) -> bool:
        """Whether the name was given beside the URI (rather than being the one string given)."""
        return self._named

    def failed(self) -> Failed:
        """True when the last run that should have produced this asset failed (a failure entry is queued)."""
        return Failed(self)

    def constructor_kwargs(self) -> dict[str, Any]:
        """The keyword arguments that rebuild this asset."""
        return {
            "name": self.name,
            "uri": self.uri if self._named else None,
            "group": self.group,
            "extra": thaw_json(self.extra),
            "watchers": self.watchers,
            "expect": self.expect,
        }

    def __reduce__(self) -> tuple[Any, ...]:
        # copy, deepcopy and pickle rebuild through __init__ (slots are read-only, extra is a mappingproxy)
        return (_asset_from, (self.constructor_kwargs(),))

    # Identity is the URI alone, so an outlet declared with other extras still triggers the consumers.
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Asset):
            return NotImplemented
        return self.uri == other.uri

    def __hash__(self) -> int:
        return hash(("asset", self.uri))

    def __repr__(self) -> str:
        return f"Asset({self.uri!r})"

    @property
    def key(self) -> str:
        """``a:URI``."""
        return "a:" + self.uri

    @property
    def subject(self) -> str:
        """The URI."""
        return self.uri

    def _names(self) -> dict[str, str]:
        return {"uri": self.uri}

    def _could(self, assets: frozenset[str], aliases: frozenset[str]) -> bool:
        return self.uri in assets

    def feeds(self, assets: frozenset[str], aliases: frozenset[str], *, sure: bool) -> bool:
        """Whether the asset is among ``assets``."""
        return self.uri in assets

    def iter_assets(self) -> Iterator[Asset]:
        """Yield this asset."""
        yield self

    def to_json(self) -> dict[str, Any]:
        """``{"type": "asset", "uri": ...}``."""
        return {"type": "asset", "uri": self.uri}


class AssetRef(_Selector):
    """``Asset.ref(name=...)`` or ``Asset.ref(uri=...)``: an asset declared elsewhere, resolved by the catalog.

    Raises:
        DefinitionError: not exactly one of ``name`` and ``uri`` is given, or it is invalid.

    """

    __slots__ = ("ref_name", "ref_uri")

    op = "asset_ref"
    ref_name: str | None
    ref_uri: str | None

    def __init__(self, *, name: str | None = None, uri: str | None = None) -> None:
        if (name is None) == (uri is None):
            raise DefinitionError("Asset.ref() takes exactly one of name= or uri=")
        if name is not None:
            _identifier(name, "Asset.ref name")
        object.__setattr__(self, "ref_name", name)
        object.__setattr__(self, "ref_uri", normalize_uri(uri) if uri is not None else None)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_ref_from, (self.ref_name, self.ref_uri))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Condition):
            return NotImplemented
        return isinstance(other, AssetRef) and (self.ref_name, self.ref_uri) == (
            other.ref_name,
            other.ref_uri,
        )

    def __hash__(self) -> int:
        return hash(("asset_ref", self.ref_name, self.ref_uri))

    def __repr__(self) -> str:
        return f"Asset.ref(name={self.ref_name!r})" if self.ref_name else f"Asset.ref(uri={self.ref_uri!r})"

    def _unresolved(self) -> DefinitionError:
        return DefinitionError(f"{self!r} is resolved when the catalog is built; build the catalog first")

    @property
    def key(self) -> str:
        """Refused: a reference selects nothing until it is resolved."""
        raise self._unresolved()

    @property
    def subject(self) -> str:
        """The referenced URI or name."""
        return self.ref_uri or f"name:{self.ref_name}"

    def _names(self) -> dict[str, str]:
        return {"uri": self.ref_uri} if self.ref_uri else {"name": self.ref_name or ""}

    def _could(self, assets: frozenset[str], aliases: frozenset[str]) -> bool:
        raise self._unresolved()

    def feeds(self, assets: frozenset[str], aliases: frozenset[str], *, sure: bool) -> bool:
        """Refused: resolve the reference first."""
        raise self._unresolved()

    def failed(self) -> Failed:
        """``failed()`` of the referenced asset."""
        return Failed(self)

    def iter_refs(self) -> Iterator[AssetRef]:
        """Yield this reference."""
        yield self

    def resolve(self, resolver: Callable[[AssetRef], Asset]) -> Condition:
        """The asset the resolver finds."""
        return resolver(self)

    def to_json(self) -> dict[str, Any]:
        """``{"type": "asset_ref", "name" | "uri": ...}``."""
        if self.ref_uri is not None:
            return {"type": "asset_ref", "uri": self.ref_uri}
        return {"type": "asset_ref", "name": self.ref_name}


def _ref_from(name: str | None, uri: str | None) -> AssetRef:
    return AssetRef(name=name, uri=uri)


class AssetAlias(_Selector):
    """A name that runs resolve to concrete assets at run time; true when any resolved asset has an event.

    Raises:
        DefinitionError: the name is empty, too long or not printable ASCII, or the group is invalid.

    """

    __slots__ = ("group", "name")

    op = "alias"
    name: str
    group: str

    def __init__(self, name: str, *, group: str = "asset") -> None:
        if not isinstance(name, str) or not name.strip():
            raise DefinitionError("AssetAlias name must be a non-empty string")
        if len(name) > _ALIAS_NAME_MAX or not name.isascii() or not name.isprintable():
            raise DefinitionError(
                f"AssetAlias name {name!r} must be printable ASCII of at most {_ALIAS_NAME_MAX} characters"
            )
        _identifier(group, f"AssetAlias {name!r}: group")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "group", group)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_alias_from, (self.name, self.group))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AssetAlias):
            return NotImplemented
        return self.name == other.name

    def __hash__(self) -> int:
        return hash(("alias", self.name))

    def __repr__(self) -> str:
        return f"AssetAlias({self.name!r})"

    @property
    def key(self) -> str:
        """``l:NAME``."""
        return "l:" + self.name

    @property
    def subject(self) -> str:
        """``alias:NAME``."""
        return "alias:" + self.name

    def _names(self) -> dict[str, str]:
        return {"name": self.name}

    def _could(self, assets: frozenset[str], aliases: frozenset[str]) -> bool:
        return self.name in aliases

    def feeds(self, assets: frozenset[str], aliases: frozenset[str], *, sure: bool) -> bool:
        """Whether the alias is among ``aliases``."""
        return self.name in aliases

    def iter_aliases(self) -> Iterator[AssetAlias]:
        """Yield this alias."""
        yield self

    def to_json(self) -> dict[str, Any]:
        """``{"type": "alias", "name": ...}``."""
        return {"type": "alias", "name": self.name}


def _alias_from(name: str, group: str) -> AssetAlias:
    return AssetAlias(name, group=group)


class Where(_Leaf):
    """``a.where(PATTERN)``: real events of ``a`` (an asset or alias) whose extra matched ``PATTERN``.

    Matching happens when an event is routed (the evaluator records on the queue entry which where-keys it
    matched); an event that no node of the pipeline counts is recorded but never queued there. The pattern
    is EventBridge-style (the watchers' ``filter``): it matches the event's extra, or, for a watcher event,
    the message payload at ``extra["payload"]``.

    Raises:
        DefinitionError: the target is not an asset or alias, or the pattern is malformed.

    """

    __slots__ = ("_key", "of", "pattern")

    op = "where"
    of: _Selector
    pattern: Mapping[str, Any]
    _key: str

    def __init__(self, of: Condition, pattern: Mapping[str, Any]) -> None:
        if isinstance(of, Where):
            raise DefinitionError("where() of a where(): put every field in one pattern")
        if not isinstance(of, _Selector):
            raise DefinitionError(f"where() applies to an asset or an alias, not {type(of).__name__}")
        validate_pattern(pattern, "where pattern")
        frozen = freeze_json(dict(pattern), "where pattern")
        object.__setattr__(self, "of", of)
        object.__setattr__(self, "pattern", frozen)
        text = json.dumps({"of": of.to_json(), "pattern": thaw_json(frozen)}, sort_keys=True)
        object.__setattr__(self, "_key", "w-" + hashlib.sha256(text.encode()).hexdigest()[:16])

    def __reduce__(self) -> tuple[Any, ...]:
        return (Where, (self.of, thaw_json(self.pattern)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Condition):
            return NotImplemented
        return isinstance(other, Where) and self._key == other._key and self.of == other.of

    def __hash__(self) -> int:
        return hash(("where", self._key))

    def __repr__(self) -> str:
        return f"{self.of!r}.where({json.dumps(thaw_json(self.pattern), sort_keys=True)})"

    def where(self, pattern: Mapping[str, Any]) -> Where:
        """Refused: one pattern holds every field."""
        raise DefinitionError("where() of a where(): put every field in one pattern")

    @property
    def where_key(self) -> str:
        """The stable key queue entries record when their event matched (``w-`` and 16 hex digits)."""
        return self._key

    @property
    def key(self) -> str:
        """``w:WHERE-KEY``."""
        return "w:" + self._key

    def children_nodes(self) -> tuple[Condition, ...]:
        """The target."""
        return (self.of,)

    def subjects(self) -> Iterator[tuple[str, str]]:
        """The target's subject: the where counts towards its asset or alias being updated."""
        yield from self.of.subjects()

    def _could(self, assets: frozenset[str], aliases: frozenset[str]) -> bool:
        return self.of._could(assets, aliases)

    def feeds(self, assets: frozenset[str], aliases: frozenset[str], *, sure: bool) -> bool:
        """Never sure (outlet extras are known at run time only); possible when the target is fed."""
        return not sure and self.of.feeds(assets, aliases, sure=False)

    def _needs_more(self, view: EvalView) -> list[str]:
        return [self.of.subject]

    def report(self, view: EvalView) -> dict[str, Any]:
        """``{"op": "where", "value", "uri" | "name", "pattern", "key", "queued", "missed"}``."""
        return {
            "op": "where",
            "value": self._holds(view),
            **self.of._names(),
            "pattern": thaw_json(self.pattern),
            "key": self._key,
            "queued": view.count(self.key),
            "missed": view.missed(self.key, self.of.key),
        }

    def resolve(self, resolver: Callable[[AssetRef], Asset]) -> Condition:
        """The where of the resolved target."""
        target = self.of.resolve(resolver)
        return self if target is self.of else Where(target, thaw_json(self.pattern))

    def iter_refs(self) -> Iterator[AssetRef]:
        """The target's reference, if it is one."""
        yield from self.of.iter_refs()

    def to_json(self) -> dict[str, Any]:
        """``{"type": "where", "of": COND, "pattern": {...}, "key": ...}``."""
        return {
            "type": "where",
            "of": self.of.to_json(),
            "pattern": thaw_json(self.pattern),
            "key": self._key,
        }


class _Outcome(_Leaf):
    """A leaf over synthetic entries of one asset: failures or late arrivals."""

    __slots__ = ("asset",)

    asset: Asset | AssetRef
    _prefix = ""

    def __init__(self, asset: Condition) -> None:
        if not isinstance(asset, Asset | AssetRef):
            raise DefinitionError(f"{self.op}() applies to an asset, not {type(asset).__name__}")
        object.__setattr__(self, "asset", asset)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.asset,))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Condition):
            return NotImplemented
        return type(other) is type(self) and self.asset == other.asset

    def __hash__(self) -> int:
        return hash((self.op, self.asset))

    @property
    def uri(self) -> str:
        """The asset's URI."""
        if isinstance(self.asset, AssetRef):
            raise self.asset._unresolved()
        return self.asset.uri

    @property
    def key(self) -> str:
        """``f:URI`` (failed) or ``t:URI`` (late)."""
        return self._prefix + self.uri

    def children_nodes(self) -> tuple[Condition, ...]:
        """None: the asset is named, not evaluated."""
        return ()

    def iter_assets(self) -> Iterator[Asset]:
        """The asset: its consumers index includes this pipeline, so its synthetic entries reach it."""
        if isinstance(self.asset, Asset):
            yield self.asset

    def iter_refs(self) -> Iterator[AssetRef]:
        """The asset, when it is a reference."""
        if isinstance(self.asset, AssetRef):
            yield self.asset

    def subjects(self) -> Iterator[tuple[str, str]]:
        """None: failures and lateness are not updates."""
        yield from ()

    def _could(self, assets: frozenset[str], aliases: frozenset[str]) -> bool:
        return self.uri in assets

    def _needs_more(self, view: EvalView) -> list[str]:
        return [self.uri]

    def report(self, view: EvalView) -> dict[str, Any]:
        """``{"op": "failed" | "late", "value", "uri", "queued"}``."""
        return {"op": self.op, "value": self._holds(view), "uri": self.uri, "queued": view.count(self.key)}

    def resolve(self, resolver: Callable[[AssetRef], Asset]) -> Condition:
        """The same node on the resolved asset."""
        if isinstance(self.asset, AssetRef):
            return type(self)(resolver(self.asset))
        return self

    def to_json(self) -> dict[str, Any]:
        """``{"type": "failed" | "late", "of": ASSET}``."""
        return {"type": self.op, "of": self.asset.to_json()}


class Failed(_Outcome):
    """``a.failed()``: true when the last run that should have produced ``a`` failed.

    That is, a failure entry of ``a`` is queued: a run of a pipeline with ``a`` in its outlets failed, and no
    event of ``a`` came since.
    """

    __slots__ = ()
    op = "failed"
    _prefix = "f:"

    def __repr__(self) -> str:
        return f"{self.asset!r}.failed()"

    def feeds(self, assets: frozenset[str], aliases: frozenset[str], *, sure: bool) -> bool:
        """Possible when a feeder produces the asset (its run may fail); never sure."""
        return not sure and self.uri in assets


class Late(_Outcome):
    """``late(a)``: true when a late entry of ``a`` is queued (``a`` missed its ``ExpectedArrival``)."""

    __slots__ = ()
    op = "late"
    _prefix = "t:"

    def __repr__(self) -> str:
        return f"late({self.asset!r})"

    def feeds(self, assets: frozenset[str], aliases: frozenset[str], *, sure: bool) -> bool:
        """Never: a producer's event answers lateness rather than causing it."""
        return False


def late(asset: Asset | AssetRef) -> Late:
    """True when ``asset`` missed its expected arrival; ``Pipeline(schedule=late(a))`` is a fallback pipeline.

    Raises:
        DefinitionError: ``asset`` is not an asset.

    """
    return Late(asset)


# ---- counting and ordering ---------------------------------------------------------------------------


def _stream(node: object, what: str) -> _Stream:
    if not isinstance(node, _Stream):
        raise DefinitionError(
            f"{what} takes an asset, an alias, a.where(...), a.failed(), late(a), at_least(...) or "
            f"a.then(...), not {type(node).__name__}"
        )
    return node


class AtLeast(_Stream):
    """``at_least(x, n)``: true with ``n`` or more entries of ``x``; a run consumes all of them."""

    __slots__ = ("n", "of")

    op = "at_least"
    of: _Stream
    n: int

    def __init__(self, of: Condition, n: int) -> None:
        target = _stream(of, "at_least()")
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 10_000:
            raise DefinitionError(f"at_least(): n must be a whole number from 1 to 10000, got {n!r}")
        object.__setattr__(self, "of", target)
        object.__setattr__(self, "n", n)

    def __reduce__(self) -> tuple[Any, ...]:
        return (AtLeast, (self.of, self.n))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Condition):
            return NotImplemented
        return isinstance(other, AtLeast) and (self.of, self.n) == (other.of, other.n)

    def __hash__(self) -> int:
        return hash(("at_least", self.of, self.n))

    def __repr__(self) -> str:
        return f"at_least({self.of!r}, {self.n})"

    def _holds(self, view: EvalView) -> bool:
        return self.of.tally(view) >= self.n

    def times(self, view: EvalView) -> Sequence[SortKey]:
        """The times of ``x`` from its n-th on."""
        return self.of.times(view)[self.n - 1 :]

    def children_nodes(self) -> tuple[Condition, ...]:
        """The counted node."""
        return (self.of,)

    def _could(self, assets: frozenset[str], aliases: frozenset[str]) -> bool:
        return self.of._could(assets, aliases)

    def feeds(self, assets: frozenset[str], aliases: frozenset[str], *, sure: bool) -> bool:
        """As its node: a feeder that runs again makes as many events as needed."""
        return self.of.feeds(assets, aliases, sure=sure)

    def _needs_more(self, view: EvalView) -> list[str]:
        return self.of._needs_more(view)

    def report(self, view: EvalView) -> dict[str, Any]:
        """``{"op": "at_least", "value", "n", "queued", "children": [node]}``."""
        return {
            "op": "at_least",
            "value": self._holds(view),
            "n": self.n,
            "queued": self.of.tally(view),
            "children": [self.of.report(view)],
        }

    def resolve(self, resolver: Callable[[AssetRef], Asset]) -> Condition:
        """The same count of the resolved node."""
        target = self.of.resolve(resolver)
        return self if target is self.of else AtLeast(target, self.n)

    def is_any_of_leaves(self) -> bool:
        """Only ``at_least(x, 1)`` of a leaf: one entry satisfies it."""
        return self.n == 1 and self.of.is_any_of_leaves()

    def to_json(self) -> dict[str, Any]:
        """``{"type": "at_least", "of": COND, "n": N}``."""
        return {"type": "at_least", "of": self.of.to_json(), "n": self.n}


def at_least(of: Condition, n: int) -> AtLeast:
    """True with ``n`` or more queued entries of ``of`` (an asset, alias, where, then...); a run takes all.

    Raises:
        DefinitionError: ``of`` cannot be counted or ``n`` is not a whole number from 1 to 10000.

    """
    return AtLeast(of, n)


def _seconds(delta: timedelta | None) -> float | None:
    return None if delta is None else delta.total_seconds()


class Then(_Stream):
    """``a.then(b, within=W)``: true once an entry of ``b`` comes after one of ``a`` and no more than ``W`` later.

    Order is (timestamp, id); ``within=None`` means any time later. The run consumes both (a batch run
    consumes its whole queue).

    Raises:
        DefinitionError: an operand cannot be ordered, or ``within`` is not a positive timedelta.

    """

    __slots__ = ("first", "second", "within")

    op = "then"
    first: _Stream
    second: _Stream
    within: timedelta | None

    def __init__(self, first: Condition, second: Condition, within: timedelta | None = None) -> None:
        a = _stream(first, "then()")
        b = _stream(second, "then()")
        if within is not None and (not isinstance(within, timedelta) or within <= timedelta(0)):
            raise DefinitionError(f"then(): within must be a positive timedelta or None, got {within!r}")
        object.__setattr__(self, "first", a)
        object.__setattr__(self, "second", b)
        object.__setattr__(self, "within", within)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Then, (self.first, self.second, self.within))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Condition):
            return NotImplemented
        return isinstance(other, Then) and (self.first, self.second, self.within) == (
            other.first,
            other.second,
            other.within,
        )

    def __hash__(self) -> int:
        return hash(("then", self.first, self.second, self.within))

    def __repr__(self) -> str:
        return f"{self.first!r}.then({self.second!r}, within={self.within!r})"

    def times(self, view: EvalView) -> Sequence[SortKey]:
        """Each time of the second node that follows a time of the first within the window."""
        before = self.first.times(view)
        if not before:
            return ()
        found: list[SortKey] = []
        for moment in self.second.times(view):
            i = bisect.bisect_left(before, moment)  # before[:i] come strictly earlier in (timestamp, id)
            if i and (self.within is None or moment[0] - before[i - 1][0] <= self.within):
                found.append(moment)
        return found

    def _holds(self, view: EvalView) -> bool:
        return bool(self.times(view))

    def children_nodes(self) -> tuple[Condition, ...]:
        """The two operands."""
        return (self.first, self.second)

    def _could(self, assets: frozenset[str], aliases: frozenset[str]) -> bool:
        return self.first._could(assets, aliases) and self.second._could(assets, aliases)

    def feeds(self, assets: frozenset[str], aliases: frozenset[str], *, sure: bool) -> bool:
        """Never sure (the order of outlet events is not known); possible when both are fed."""
        return (
            not sure
            and self.first.feeds(assets, aliases, sure=False)
            and self.second.feeds(assets, aliases, sure=False)
        )

    def _needs_more(self, view: EvalView) -> list[str]:
        if not self.first.times(view):
            return _dedupe([*self.first._needs_more(view), *self.second._needs_more(view)])
        return self.second._needs_more(view)

    def report(self, view: EvalView) -> dict[str, Any]:
        """``{"op": "then", "value", "within_seconds", "children": [first, second]}``."""
        return {
            "op": "then",
            "value": self._holds(view),
            "within_seconds": _seconds(self.within),
            "children": [self.first.report(view), self.second.report(view)],
        }

    def resolve(self, resolver: Callable[[AssetRef], Asset]) -> Condition:
        """The same sequence of the resolved operands."""
        a, b = self.first.resolve(resolver), self.second.resolve(resolver)
        return self if (a is self.first and b is self.second) else Then(a, b, self.within)

    def is_any_of_leaves(self) -> bool:
        """Never: a sequence needs two entries."""
        return False

    def to_json(self) -> dict[str, Any]:
        """``{"type": "then", "first": COND, "then": COND, "within_seconds": S | null}``."""
        return {
            "type": "then",
            "first": self.first.to_json(),
            "then": self.second.to_json(),
            "within_seconds": _seconds(self.within),
        }


# ---- all, any, none ----------------------------------------------------------------------------------


class _Group(Condition):
    __slots__ = ("children",)

    children: tuple[Condition, ...]

    def __init__(self, *children: Condition) -> None:
        flat: list[Condition] = []
        for child in children:
            if not isinstance(child, Condition) or isinstance(child, NoAssets):
                raise DefinitionError(
                    f"{type(self).__name__} takes assets, aliases or conditions, not {type(child).__name__}"
                )
            # Flatten (a & b) & c into one node so documents and graphs stay readable.
            flat.extend(child.children if type(child) is type(self) else (child,))
        if not flat:
            raise DefinitionError(f"{type(self).__name__} needs at least one asset or alias")
        object.__setattr__(self, "children", tuple(flat))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), self.children)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Condition):
            return NotImplemented
        return type(other) is type(self) and self.children == other.children

    def __hash__(self) -> int:
        return hash((self.op, self.children))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(map(repr, self.children))})"

    def children_nodes(self) -> tuple[Condition, ...]:
        """The children."""
        return self.children

    def report(self, view: EvalView) -> dict[str, Any]:
        """``{"op": "all" | "any", "value", "children": [...]}``."""
        return {
            "op": self.op,
            "value": self._holds(view),
            "children": [child.report(view) for child in self.children],
        }

    def resolve(self, resolver: Callable[[AssetRef], Asset]) -> Condition:
        """The same group of resolved children."""
        resolved = [child.resolve(resolver) for child in self.children]
        if all(a is b for a, b in zip(resolved, self.children, strict=True)):
            return self
        return type(self)(*resolved)

    def to_json(self) -> dict[str, Any]:
        """``{"type": "all"|"any", "of": [...]}``."""
        return {"type": self.op, "of": [child.to_json() for child in self.children]}


class AssetAll(_Group):
    """True when every child holds (``a & b``; a list schedule means the same)."""

    __slots__ = ()
    op = "all"

    def _holds(self, view: EvalView) -> bool:
        return all(child._holds(view) for child in self.children)

    def _could(self, assets: frozenset[str], aliases: frozenset[str]) -> bool:
        return all(child._could(assets, aliases) for child in self.children)

    def feeds(self, assets: frozenset[str], aliases: frozenset[str], *, sure: bool) -> bool:
        """Whether every child is fed."""
        return all(child.feeds(assets, aliases, sure=sure) for child in self.children)

    def _needs_more(self, view: EvalView) -> list[str]:
        return _dedupe(s for child in self.children for s in child.needs(view))

    def is_any_of_leaves(self) -> bool:
        """True only for a single child that is itself any-of-leaves."""
        return len(self.children) == 1 and self.children[0].is_any_of_leaves()


class AssetAny(_Group):
    """True when any child holds (``a | b``)."""

    __slots__ = ()
    op = "any"

    def _holds(self, view: EvalView) -> bool:
        return any(child._holds(view) for child in self.children)

    def _could(self, assets: frozenset[str], aliases: frozenset[str]) -> bool:
        return any(child._could(assets, aliases) for child in self.children)

    def feeds(self, assets: frozenset[str], aliases: frozenset[str], *, sure: bool) -> bool:
        """Whether any child is fed."""
        return any(child.feeds(assets, aliases, sure=sure) for child in self.children)

    def _needs_more(self, view: EvalView) -> list[str]:
        # the cheapest way to satisfy it: the child that needs the fewest subjects (the first on ties)
        return min((child.needs(view) for child in self.children), key=len)

    def is_any_of_leaves(self) -> bool:
        """True when every child is any-of-leaves."""
        return all(child.is_any_of_leaves() for child in self.children)


class NoAssets(Condition):
    """The condition of a schedule with no asset part (manual or time only): never true, names nothing."""

    __slots__ = ()
    op = "none"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Condition):
            return NotImplemented
        return isinstance(other, NoAssets)

    def __hash__(self) -> int:
        return hash("none")

    def __repr__(self) -> str:
        return "NoAssets()"

    def __and__(self, other: object) -> AssetAll:
        raise DefinitionError("a schedule without assets cannot be combined with & or |")

    __or__ = __and__  # type: ignore[assignment]

    def _holds(self, view: EvalView) -> bool:
        return False

    def _could(self, assets: frozenset[str], aliases: frozenset[str]) -> bool:
        return False

    def feeds(self, assets: frozenset[str], aliases: frozenset[str], *, sure: bool) -> bool:
        """Never."""
        return False

    def _needs_more(self, view: EvalView) -> list[str]:
        return []

    def report(self, view: EvalView) -> dict[str, Any]:
        """``{"op": "none", "value": false}``."""
        return {"op": "none", "value": False}

    def resolve(self, resolver: Callable[[AssetRef], Asset]) -> Condition:
        """Itself."""
        return self

    def is_any_of_leaves(self) -> bool:
        """No entry ever reaches it."""
        return True

    def to_json(self) -> dict[str, Any]:
        """``{"type": "none"}``."""
        return {"type": "none"}


NO_ASSETS = NoAssets()


def as_condition(schedule: Condition | Sequence[Condition], what: str) -> Condition:
    """Turn a schedule's asset part (a condition, or a list meaning all-of) into one condition.

    Raises:
        DefinitionError: the value is neither a condition nor a non-empty list of conditions.

    """
    if isinstance(schedule, Condition) and not isinstance(schedule, NoAssets):
        return schedule
    if isinstance(schedule, list | tuple):
        items = list(schedule)
        if not items:
            raise DefinitionError(f"{what}: an empty list of assets can never be satisfied")
        if len(items) == 1 and isinstance(items[0], Condition) and not isinstance(items[0], NoAssets):
            return items[0]
        return AssetAll(*items)
    raise DefinitionError(
        f"{what}: expected an Asset, an AssetAlias, an expression of them with & and |, or a list of them; "
        f"got {type(schedule).__name__}"
    )


def condition_from_json(doc: Mapping[str, Any]) -> Condition:
    """Rebuild a condition from its ``COND`` document.

    Raises:
        DocumentError: the document is not a valid condition.

    """
    kind = doc.get("type") if isinstance(doc, Mapping) else None
    try:
        if kind == "asset":
            return Asset(uri=str(doc["uri"]))
        if kind == "alias":
            return AssetAlias(str(doc["name"]))
        if kind == "asset_ref":
            return AssetRef(name=doc.get("name"), uri=doc.get("uri"))
        if kind == "where":
            node = Where(condition_from_json(doc["of"]), doc["pattern"])
            if "key" in doc and doc["key"] != node.where_key:
                raise DocumentError(
                    f"where document {doc!r} has key {doc['key']!r}, its content gives {node.where_key!r}"
                )
            return node
        if kind in ("failed", "late"):
            target = condition_from_json(doc["of"])
            return Failed(target) if kind == "failed" else Late(target)
        if kind == "at_least":
            return AtLeast(condition_from_json(doc["of"]), doc["n"])
        if kind == "then":
            seconds = doc.get("within_seconds")
            within = None if seconds is None else timedelta(seconds=float(seconds))
            return Then(condition_from_json(doc["first"]), condition_from_json(doc["then"]), within)
        if kind == "none":
            return NO_ASSETS
    except KeyError as exc:
        raise DocumentError(f"{kind} condition document {doc!r} has no {exc} key") from exc
    except (DefinitionError, TypeError, ValueError) as exc:
        if isinstance(exc, DocumentError):
            raise
        raise DocumentError(f"invalid {kind} condition document {doc!r}: {exc}") from exc
    if kind in ("all", "any"):
        of = doc.get("of", [])
        if not isinstance(of, list | tuple):
            raise DocumentError(f"condition {kind!r}: 'of' must be a list of conditions, got {of!r}")
        children = [condition_from_json(child) for child in of]
        if not children:
            raise DocumentError(f"condition {kind!r} has no children")
        try:
            return AssetAll(*children) if kind == "all" else AssetAny(*children)
        except DefinitionError as exc:
            raise DocumentError(f"invalid {kind} condition document: {exc}") from exc
    raise DocumentError(f"not a condition document: {doc!r}")


__all__ = [
    "NO_ASSETS",
    "Asset",
    "AssetAlias",
    "AssetAll",
    "AssetAny",
    "AssetRef",
    "AtLeast",
    "Condition",
    "EvalView",
    "Failed",
    "Late",
    "NoAssets",
    "SortKey",
    "Then",
    "Undecidable",
    "Where",
    "as_condition",
    "at_least",
    "condition_from_json",
    "late",
]
