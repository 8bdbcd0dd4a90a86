"""References to assets and aliases, and the Metadata a job attaches to its outlet events."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from assetflow_job.contract import MAX_VERSION_CHARS


@dataclass(frozen=True)
class AssetRef:
    """An asset named by its URI; anything with a ``uri`` attribute (``assetflow.Asset``) works alike."""

    uri: str

    def __post_init__(self) -> None:
        if not isinstance(self.uri, str) or not self.uri:
            raise ValueError(f"an asset URI must be a non-empty string, not {self.uri!r}")


@dataclass(frozen=True)
class AliasRef:
    """An asset alias named by its name; anything with a ``name`` and no ``uri`` works alike."""

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"an alias name must be a non-empty string, not {self.name!r}")


def resolve_key(key: object) -> AssetRef | AliasRef:
    """Turn a URI string, an asset-like or an alias-like object into an AssetRef or AliasRef.

    Raises:
        TypeError: when ``key`` is none of those.

    """
    if isinstance(key, (AssetRef, AliasRef)):
        return key
    if isinstance(key, str):
        return AssetRef(key)
    uri = getattr(key, "uri", None)
    if isinstance(uri, str):
        return AssetRef(uri)
    name = getattr(key, "name", None)
    if isinstance(name, str):
        return AliasRef(name)
    raise TypeError(
        f"expected an asset URI, an object with a 'uri' or an alias with a 'name', got {type(key).__name__}"
    )


def asset_uri(value: object) -> str:
    """Return the URI of a URI string or an asset-like object.

    Raises:
        TypeError: when ``value`` names an alias or nothing usable.

    """
    ref = resolve_key(value)
    if isinstance(ref, AliasRef):
        raise TypeError(f"expected an asset, got the alias {ref.name!r}")
    return ref.uri


def alias_name(value: object) -> str:
    """Return the name of an alias given as a name string, an AliasRef or an alias-like object.

    Raises:
        TypeError: when ``value`` is an asset or nothing usable.

    """
    if isinstance(value, str):
        return AliasRef(value).name
    ref = resolve_key(value)
    if isinstance(ref, AssetRef):
        raise TypeError(f"expected an alias, got the asset {ref.uri!r}")
    return ref.name


def match_key(uri: str) -> str:
    """Return the form two spellings of one asset URI share, as the scheduler normalises them.

    Lower-case scheme; for schemes other than ``x-``, no trailing slash (an empty path is ``/``), a
    sorted query and no fragment. Scheme-less identifiers are compared as they are. It only matches
    spellings: the scheduler validates the URIs a job reports.
    """
    if "://" not in uri:
        return uri
    parts = urlsplit(uri)
    if not parts.scheme:
        return uri
    if parts.scheme.startswith("x-"):
        return parts.scheme + uri[len(parts.scheme) :]
    query = "&".join(sorted(parts.query.split("&"))) if parts.query else ""
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") or "/", query, ""))


def json_copy(extra: object, *, what: str = "extra") -> dict[str, Any]:
    """Return a deep copy of a JSON object, checked to be serialisable as strict JSON.

    Raises:
        TypeError: when ``extra`` is not a mapping or holds values JSON cannot carry.
        ValueError: when it holds NaN or infinity.

    """
    if extra is None:
        return {}
    if not isinstance(extra, Mapping):
        raise TypeError(f"{what} must be a mapping, got {type(extra).__name__}")
    try:
        text = json.dumps(dict(extra), allow_nan=False)
    except TypeError as exc:
        raise TypeError(f"{what} must be JSON-serialisable: {exc}") from exc
    except ValueError as exc:
        raise ValueError(f"{what} must be strict JSON (no NaN or infinity): {exc}") from exc
    copied: dict[str, Any] = json.loads(text)
    return copied


class Metadata:
    """Extra for one outlet event, as Airflow's ``Metadata``: with ``alias`` the asset is added to it.

    ``asset`` is a URI or an asset-like object, ``alias`` a name or an alias-like object. ``version`` is the
    data version the job wrote (a snapshot id, a content hash): the outlet event carries it, and consumers
    with ``skip_unchanged=True`` run once per version.
    """

    __slots__ = ("alias", "asset", "extra", "version")

    def __init__(
        self,
        asset: object,
        extra: Mapping[str, Any] | None = None,
        alias: object = None,
        *,
        version: object = None,
    ) -> None:
        self.asset = asset_uri(asset)
        self.extra = json_copy(extra)
        self.alias = None if alias is None else alias_name(alias)
        self.version = check_version(version)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Metadata):
            return NotImplemented
        return (self.asset, self.extra, self.alias, self.version) == (
            other.asset,
            other.extra,
            other.alias,
            other.version,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        version = "" if self.version is None else f", version={self.version!r}"
        return f"Metadata(asset={self.asset!r}, extra={self.extra!r}, alias={self.alias!r}{version})"


def check_version(version: object) -> str | None:
    """A data version: None, or a non-empty string of at most ``MAX_VERSION_CHARS`` (an int is turned into one).

    Raises:
        TypeError: ``version`` is neither a string nor an integer.
        ValueError: it is empty or too long.
    """
    if version is None:
        return None
    if isinstance(version, bool) or not isinstance(version, (str, int)):
        raise TypeError(f"version must be a string (or an integer), not {type(version).__name__}")
    text = str(version)
    if not text or len(text) > MAX_VERSION_CHARS:
        raise ValueError(f"version must be 1 to {MAX_VERSION_CHARS} characters, got {len(text)}")
    return text
