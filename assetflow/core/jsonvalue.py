"""JSON values in the core: frozen (read-only) copies, plain copies back, and the one canonical text."""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from assetflow.core.errors import DefinitionError


def freeze_json(value: Any, what: str) -> Any:
    """Return a deep, read-only copy of a JSON-compatible value.

    Raises:
        DefinitionError: the value cannot be written as JSON.

    """
    plain = _frozen_plain(value)
    if plain is not _NOT_PLAIN:
        return plain
    try:
        copied = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise DefinitionError(
            f"{what} must be JSON-serialisable (dicts, lists, str, numbers, bools): {exc}"
        ) from exc
    return _freeze(copied)


_NOT_PLAIN = object()
_SCALARS = (str, int, bool, type(None))


def _frozen_plain(value: Any) -> Any:
    """The frozen copy of a value that is already plain JSON (str keys, lists, finite numbers), in one walk.

    Frozen values (mapping proxies, tuples) count as plain: freezing a frozen value gives the same value. Anything
    else (other keys or types, NaN) gives ``_NOT_PLAIN``: the JSON round trip then decides exactly as before. Most
    events' extras and sources are plain, and this skips their encode and decode.
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is float:
        return value if value == value and value not in (_INF, -_INF) else _NOT_PLAIN
    if kind is dict or kind is MappingProxyType:  # an already frozen value is frozen again as is
        frozen = {}
        for key, item in value.items():
            if type(key) is not str:
                return _NOT_PLAIN
            copied = _frozen_plain(item)
            if copied is _NOT_PLAIN:
                return _NOT_PLAIN
            frozen[key] = copied
        return MappingProxyType(frozen)
    if kind is list or kind is tuple:
        items = []
        for item in value:
            copied = _frozen_plain(item)
            if copied is _NOT_PLAIN:
                return _NOT_PLAIN
            items.append(copied)
        return tuple(items)
    return _NOT_PLAIN


_INF = float("inf")


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def thaw_json(value: Any) -> Any:
    """Return a plain, mutable JSON value (dicts and lists) from a frozen one."""
    if isinstance(value, Mapping):
        return {k: thaw_json(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [thaw_json(v) for v in value]
    return value


def canonical_json(value: Any) -> str:
    """The one canonical text of a JSON value: sorted keys, no spaces, ASCII only (others as escapes).

    Equal values give equal text, hence equal ids, hashes, sizes and bodies. ASCII keeps lone surrogates
    (which JSON escapes can carry) encodable, and makes the text's length its size in bytes.

    Raises:
        ValueError: ``value`` holds NaN or an infinity (ingest and the API refuse them).
    """
    return json.dumps(thaw_json(value), sort_keys=True, separators=(",", ":"), allow_nan=False)


__all__ = ["canonical_json", "freeze_json", "thaw_json"]
