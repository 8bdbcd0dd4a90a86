"""Content filters on message payloads, in the style of EventBridge event patterns."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from assetflow.core.errors import DefinitionError

_NUMERIC_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    "=": operator.eq,
    ">=": operator.ge,
    ">": operator.gt,
}
_MATCHERS = frozenset({"prefix", "suffix", "exists", "numeric", "anything-but"})
_MISSING = object()


def validate_pattern(pattern: Any, path: str = "filter") -> None:
    """Check that ``pattern`` is a well-formed filter.

    A pattern maps payload keys to a list of allowed values or matchers (``{"prefix": s}``,
    ``{"suffix": s}``, ``{"exists": bool}``, ``{"numeric": [">", 0, "<=", 5]}``,
    ``{"anything-but": [...]}``), or to a nested pattern.

    Raises:
        DefinitionError: the pattern is malformed; the message names the offending path.

    """
    if not isinstance(pattern, Mapping) or not pattern:
        raise DefinitionError(f"{path}: a filter pattern must be a non-empty dict of payload keys")
    for key, rule in pattern.items():
        where = f"{path}.{key}"
        if isinstance(rule, Mapping):
            validate_pattern(rule, where)
        elif isinstance(rule, list | tuple):
            if not rule:
                raise DefinitionError(f"{where}: an empty list matches nothing; list the allowed values")
            for item in rule:
                _validate_item(item, where)
        else:
            raise DefinitionError(
                f"{where}: expected a list of allowed values or a nested dict, got {type(rule).__name__} "
                f"(write [{rule!r}] to match one value)"
            )


def _validate_item(item: Any, where: str) -> None:
    if item is None or isinstance(item, str | int | float | bool):
        return
    if not isinstance(item, Mapping) or len(item) != 1:
        raise DefinitionError(f"{where}: a matcher is a dict with one key of {sorted(_MATCHERS)}")
    ((name, arg),) = item.items()
    if name not in _MATCHERS:
        raise DefinitionError(f"{where}: unknown matcher {name!r}; use one of {sorted(_MATCHERS)}")
    if name in ("prefix", "suffix") and not isinstance(arg, str):
        raise DefinitionError(f"{where}: {name} takes a string")
    if name == "exists" and not isinstance(arg, bool):
        raise DefinitionError(f"{where}: exists takes true or false")
    if name == "numeric":
        _numeric_terms(arg, where)
    if name == "anything-but" and not isinstance(arg, list | tuple | str | int | float):
        raise DefinitionError(f"{where}: anything-but takes a value or a list of values")


def _numeric_terms(arg: Any, where: str) -> list[tuple[Callable[[float, float], bool], float]]:
    if not isinstance(arg, list | tuple) or not arg or len(arg) % 2:
        raise DefinitionError(f"{where}: numeric takes pairs such as ['>', 0, '<=', 5]")
    terms = []
    for op, value in zip(arg[::2], arg[1::2], strict=True):
        if op not in _NUMERIC_OPS or isinstance(value, bool) or not isinstance(value, int | float):
            raise DefinitionError(
                f"{where}: numeric pair {op!r}, {value!r} needs one of {list(_NUMERIC_OPS)} and a number"
            )
        terms.append((_NUMERIC_OPS[op], float(value)))
    return terms


def matches(pattern: Mapping[str, Any], payload: Any) -> bool:
    """Whether a decoded payload matches a (valid) pattern; a non-object payload matches no pattern."""
    if not isinstance(payload, Mapping):
        return False
    for key, rule in pattern.items():
        value = payload.get(key, _MISSING)
        if isinstance(rule, Mapping):
            if value is _MISSING or not matches(rule, value):
                return False
        elif not any(_item_matches(item, value) for item in rule):
            return False
    return True


def _item_matches(item: Any, value: Any) -> bool:
    if isinstance(item, Mapping):
        ((name, arg),) = item.items()
        if name == "exists":
            return (value is not _MISSING) is arg
        if value is _MISSING:
            return False
        values = value if isinstance(value, list | tuple) else [value]
        return any(_matcher(name, arg, v) for v in values)
    if value is _MISSING:
        return False
    if isinstance(value, list | tuple):
        return any(_equal(item, v) for v in value)
    return _equal(item, value)


def _equal(expected: Any, actual: Any) -> bool:
    # JSON true must not equal 1, as in EventBridge.
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected is actual
    return bool(expected == actual)


def _matcher(name: str, arg: Any, value: Any) -> bool:
    if name == "prefix":
        return isinstance(value, str) and value.startswith(arg)
    if name == "suffix":
        return isinstance(value, str) and value.endswith(arg)
    if name == "numeric":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        return all(op(float(value), bound) for op, bound in _numeric_terms(arg, "numeric"))
    # anything-but
    excluded = arg if isinstance(arg, list | tuple) else [arg]
    return not any(_equal(e, value) for e in excluded)


def extract_field(payload: Any, dotted: str) -> Any:
    """The value at ``a.b.c`` inside a decoded payload, or None when any step is missing."""
    node = payload
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node
