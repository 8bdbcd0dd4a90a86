"""Asset conditions: assets, aliases and the ``&`` / ``|`` trees built from them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from assetflow.core.errors import DefinitionError, DocumentError
from assetflow.core.jsonvalue import freeze_json, thaw_json
from assetflow.core.uri import normalize_uri
from assetflow.core.watchers import AssetWatcher

_ALIAS_NAME_MAX = 200


class Condition:
    """A node of a schedule's condition tree; combine nodes with ``&`` and ``|``."""

    __slots__ = ()

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

    def evaluate(self, assets: Iterable[str] | frozenset[str], aliases: Iterable[str] = ()) -> bool:
        """Whether the condition holds when ``assets`` (URIs) and ``aliases`` (names) have queued events."""
        return self._holds(frozenset(assets), frozenset(aliases))

    def holds(self, assets: AbstractSet[str], aliases: AbstractSet[str] = frozenset()) -> bool:
        """``evaluate`` over sets the caller keeps, without copying them (for loops over many conditions)."""
        return self._holds(assets, aliases)

    def _holds(self, assets: AbstractSet[str], aliases: AbstractSet[str]) -> bool:
        raise NotImplementedError

    def iter_assets(self) -> Iterator[Asset]:
        """Every asset named in the tree, depth first, duplicates included."""
        raise NotImplementedError

    def iter_aliases(self) -> Iterator[AssetAlias]:
        """Every alias named in the tree, depth first, duplicates included."""
        raise NotImplementedError

    def is_any_of_leaves(self) -> bool:
        """Whether every single event of any leaf satisfies the condition (a leaf or an or-tree of leaves)."""
        raise NotImplementedError

    def to_json(self) -> dict[str, Any]:
        """The condition as the catalog document's ``COND`` shape."""
        raise NotImplementedError


class Asset(Condition):
    """A logical data entity identified by its normalised URI; ``name`` and ``extra`` never change identity.

    Raises:
        AssetUriError: the URI breaks a rule (the message says how to fix it).
        DefinitionError: the name, extra or watchers are invalid.

    """

    __slots__ = ("extra", "name", "uri", "watchers")

    uri: str
    name: str
    extra: Mapping[str, Any]
    watchers: tuple[AssetWatcher, ...]

    def __init__(
        self,
        uri: str,
        name: str | None = None,
        extra: Mapping[str, Any] | None = None,
        watchers: Sequence[AssetWatcher] = (),
    ) -> None:
        normalized = normalize_uri(uri)
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise DefinitionError(f"asset {normalized!r}: name must be a non-empty string when given")
        if extra is not None and not isinstance(extra, Mapping):
            raise DefinitionError(f"asset {normalized!r}: extra must be a dict, not {type(extra).__name__}")
        for watcher in watchers:
            if not isinstance(watcher, AssetWatcher):
                raise DefinitionError(
                    f"asset {normalized!r}: watchers must be AssetWatcher objects, not {type(watcher).__name__}"
                )
        object.__setattr__(self, "uri", normalized)
        object.__setattr__(self, "name", name if name is not None else normalized)
        object.__setattr__(self, "extra", freeze_json(dict(extra or {}), f"asset {normalized!r} extra"))
        object.__setattr__(self, "watchers", tuple(watchers))

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"Asset is immutable; cannot set {key!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        # copy, deepcopy and pickle rebuild through __init__ (slots are read-only, extra is a mappingproxy)
        return (Asset, (self.uri, self.name, thaw_json(self.extra), self.watchers))

    # Identity is the URI alone, so an outlet declared with other extras still triggers the consumers.
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Asset):
            return NotImplemented
        return self.uri == other.uri

    def __hash__(self) -> int:
        return hash(("asset", self.uri))

    def __repr__(self) -> str:
        return f"Asset({self.uri!r})"

    def _holds(self, assets: AbstractSet[str], aliases: AbstractSet[str]) -> bool:
        return self.uri in assets

    def iter_assets(self) -> Iterator[Asset]:
        """Yield this asset."""
        yield self

    def iter_aliases(self) -> Iterator[AssetAlias]:
        """Yield nothing: a plain asset names no alias."""
        yield from ()

    def is_any_of_leaves(self) -> bool:
        """A single asset: every event satisfies it."""
        return True

    def to_json(self) -> dict[str, Any]:
        """``{"type": "asset", "uri": ...}``."""
        return {"type": "asset", "uri": self.uri}


class AssetAlias(Condition):
    """A name that runs resolve to concrete assets at run time; true when any resolved asset has an event.

    Raises:
        DefinitionError: the name is empty, too long or not printable ASCII.

    """

    __slots__ = ("name",)

    name: str

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name.strip():
            raise DefinitionError("AssetAlias name must be a non-empty string")
        if len(name) > _ALIAS_NAME_MAX or not name.isascii() or not name.isprintable():
            raise DefinitionError(
                f"AssetAlias name {name!r} must be printable ASCII of at most {_ALIAS_NAME_MAX} characters"
            )
        object.__setattr__(self, "name", name)

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"AssetAlias is immutable; cannot set {key!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (AssetAlias, (self.name,))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AssetAlias):
            return NotImplemented
        return self.name == other.name

    def __hash__(self) -> int:
        return hash(("alias", self.name))

    def __repr__(self) -> str:
        return f"AssetAlias({self.name!r})"

    def _holds(self, assets: AbstractSet[str], aliases: AbstractSet[str]) -> bool:
        return self.name in aliases

    def iter_assets(self) -> Iterator[Asset]:
        """Yield nothing: an alias names no asset until run time."""
        yield from ()

    def iter_aliases(self) -> Iterator[AssetAlias]:
        """Yield this alias."""
        yield self

    def is_any_of_leaves(self) -> bool:
        """An alias: every event of a resolved asset satisfies it."""
        return True

    def to_json(self) -> dict[str, Any]:
        """``{"type": "alias", "name": ...}``."""
        return {"type": "alias", "name": self.name}


class _Group(Condition):
    __slots__ = ("children",)

    children: tuple[Condition, ...]
    _kind = ""

    def __init__(self, *children: Condition) -> None:
        flat: list[Condition] = []
        for child in children:
            if not isinstance(child, Condition):
                raise DefinitionError(
                    f"{type(self).__name__} takes assets, aliases or conditions, not {type(child).__name__}"
                )
            # Flatten (a & b) & c into one node so documents and graphs stay readable.
            flat.extend(child.children if type(child) is type(self) else (child,))
        if not flat:
            raise DefinitionError(f"{type(self).__name__} needs at least one asset or alias")
        object.__setattr__(self, "children", tuple(flat))

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; cannot set {key!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), self.children)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Condition):
            return NotImplemented
        return type(other) is type(self) and self.children == other.children

    def __hash__(self) -> int:
        return hash((self._kind, self.children))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(map(repr, self.children))})"

    def iter_assets(self) -> Iterator[Asset]:
        """Every asset of the children."""
        for child in self.children:
            yield from child.iter_assets()

    def iter_aliases(self) -> Iterator[AssetAlias]:
        """Every alias of the children."""
        for child in self.children:
            yield from child.iter_aliases()

    def to_json(self) -> dict[str, Any]:
        """``{"type": "all"|"any", "of": [...]}``."""
        return {"type": self._kind, "of": [child.to_json() for child in self.children]}


class AssetAll(_Group):
    """True when every child holds (``a & b``; a list schedule means the same)."""

    __slots__ = ()
    _kind = "all"

    def _holds(self, assets: AbstractSet[str], aliases: AbstractSet[str]) -> bool:
        return all(child._holds(assets, aliases) for child in self.children)

    def is_any_of_leaves(self) -> bool:
        """True only for a single child that is itself any-of-leaves."""
        return len(self.children) == 1 and self.children[0].is_any_of_leaves()


class AssetAny(_Group):
    """True when any child holds (``a | b``)."""

    __slots__ = ()
    _kind = "any"

    def _holds(self, assets: AbstractSet[str], aliases: AbstractSet[str]) -> bool:
        return any(child._holds(assets, aliases) for child in self.children)

    def is_any_of_leaves(self) -> bool:
        """True when every child is any-of-leaves."""
        return all(child.is_any_of_leaves() for child in self.children)


def as_condition(schedule: Condition | Sequence[Condition], what: str) -> Condition:
    """Turn a schedule's asset part (a condition, or a list meaning all-of) into one condition.

    Raises:
        DefinitionError: the value is neither a condition nor a non-empty list of conditions.

    """
    if isinstance(schedule, Condition):
        return schedule
    if isinstance(schedule, list | tuple):
        items = list(schedule)
        if not items:
            raise DefinitionError(f"{what}: an empty list of assets can never be satisfied")
        if len(items) == 1 and isinstance(items[0], Condition):
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
            return Asset(str(doc["uri"]))
        if kind == "alias":
            return AssetAlias(str(doc["name"]))
    except KeyError as exc:
        raise DocumentError(f"{kind} condition document {doc!r} has no {exc} key") from exc
    except DefinitionError as exc:
        raise DocumentError(f"invalid {kind} condition document {doc!r}: {exc}") from exc
    if kind in ("all", "any"):
        of = doc.get("of", [])
        if not isinstance(of, list | tuple):
            raise DocumentError(f"condition {kind!r}: 'of' must be a list of conditions, got {of!r}")
        children = [condition_from_json(child) for child in of]
        if not children:
            raise DocumentError(f"condition {kind!r} has no children")
        return AssetAll(*children) if kind == "all" else AssetAny(*children)
    raise DocumentError(f"not a condition document: {doc!r}")
