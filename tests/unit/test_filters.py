"""Content filters on message payloads, in the style of EventBridge patterns (docs/contracts.md PATTERN)."""

from __future__ import annotations

from typing import Any

import pytest

from assetflow import DefinitionError
from assetflow.core.filters import extract_field, matches, validate_pattern


def check(pattern: dict[str, Any], payload: Any) -> bool:
    validate_pattern(pattern)
    return matches(pattern, payload)


# --- exact values -------------------------------------------------------------------------------


def test_exact_values_are_alternatives() -> None:
    pattern = {"kind": ["order", "refund"]}
    assert check(pattern, {"kind": "order"}) is True
    assert check(pattern, {"kind": "refund"}) is True
    assert check(pattern, {"kind": "Order"}) is False
    assert check(pattern, {"other": "order"}) is False


def test_keys_must_all_match() -> None:
    pattern = {"kind": ["order"], "region": ["eu"]}
    assert check(pattern, {"kind": "order", "region": "eu", "extra": 1}) is True
    assert check(pattern, {"kind": "order", "region": "us"}) is False
    assert check(pattern, {"kind": "order"}) is False


def test_numbers_match_by_value() -> None:
    assert check({"n": [5]}, {"n": 5}) is True
    assert check({"n": [5]}, {"n": 5.0}) is True
    assert check({"n": [5]}, {"n": "5"}) is False
    assert check({"n": ["5"]}, {"n": 5}) is False


def test_null_matches_only_null() -> None:
    assert check({"n": [None]}, {"n": None}) is True
    assert check({"n": [None]}, {"n": 0}) is False
    assert check({"n": [None]}, {}) is False


@pytest.mark.parametrize(
    ("allowed", "value", "expected"),
    [
        (True, True, True),
        (True, 1, False),
        (1, True, False),
        (False, 0, False),
        (0, False, False),
        (False, False, True),
        (1.0, True, False),
    ],
)
def test_booleans_never_equal_numbers(allowed: Any, value: Any, expected: bool) -> None:
    assert check({"flag": [allowed]}, {"flag": value}) is expected


def test_list_valued_field_matches_when_any_element_matches() -> None:
    pattern = {"tags": ["urgent"]}
    assert check(pattern, {"tags": ["low", "urgent"]}) is True
    assert check(pattern, {"tags": ["low"]}) is False
    assert check(pattern, {"tags": []}) is False
    assert check({"flags": [True]}, {"flags": [1, 0]}) is False


# --- prefix / suffix ----------------------------------------------------------------------------


def test_prefix() -> None:
    pattern = {"sensor_id": [{"prefix": "s-"}]}
    assert check(pattern, {"sensor_id": "s-17"}) is True
    assert check(pattern, {"sensor_id": "S-17"}) is False
    assert check(pattern, {"sensor_id": 17}) is False
    assert check(pattern, {"sensor_id": ["x", "s-1"]}) is True
    assert check(pattern, {}) is False


def test_suffix() -> None:
    pattern = {"key": [{"suffix": ".csv"}]}
    assert check(pattern, {"key": "in/data.csv"}) is True
    assert check(pattern, {"key": "in/data.csv.gz"}) is False
    assert check(pattern, {"key": None}) is False


def test_matchers_and_values_mix_as_alternatives() -> None:
    pattern = {"key": ["exact", {"prefix": "in/"}, {"suffix": ".csv"}]}
    assert [check(pattern, {"key": k}) for k in ("exact", "in/x", "a.csv", "other")] == [
        True,
        True,
        True,
        False,
    ]


# --- exists -------------------------------------------------------------------------------------


def test_exists_true() -> None:
    pattern = {"id": [{"exists": True}]}
    assert check(pattern, {"id": "x"}) is True
    assert check(pattern, {"id": None}) is True  # present, even if null
    assert check(pattern, {"id": []}) is True
    assert check(pattern, {}) is False


def test_exists_false() -> None:
    pattern = {"id": [{"exists": False}]}
    assert check(pattern, {}) is True
    assert check(pattern, {"other": 1}) is True
    assert check(pattern, {"id": None}) is False
    assert check(pattern, {"id": 0}) is False


def test_exists_false_inside_a_present_object() -> None:
    pattern = {"meta": {"deleted": [{"exists": False}]}}
    assert check(pattern, {"meta": {}}) is True
    assert check(pattern, {"meta": {"deleted": True}}) is False


# --- numeric ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0, False), (0.0001, True), (1, True), (5, True), (5.0, True), (5.01, False), (-3, False)],
)
def test_numeric_range(value: float, expected: bool) -> None:
    assert check({"n": [{"numeric": [">", 0, "<=", 5]}]}, {"n": value}) is expected


@pytest.mark.parametrize(
    ("terms", "value", "expected"),
    [
        (["=", 3], 3, True),
        (["=", 3], 3.0, True),
        (["=", 3], 4, False),
        (["<", 10], 9.99, True),
        (["<", 10], 10, False),
        ([">=", -1.5], -1.5, True),
        ([">=", -1.5], -2, False),
    ],
)
def test_numeric_operators(terms: list[Any], value: float, expected: bool) -> None:
    assert check({"n": [{"numeric": terms}]}, {"n": value}) is expected


@pytest.mark.parametrize("value", [True, False, "3", None, {"v": 3}])
def test_numeric_never_matches_non_numbers(value: Any) -> None:
    assert check({"n": [{"numeric": [">=", 0]}]}, {"n": value}) is False


def test_numeric_on_a_list_field() -> None:
    pattern = {"n": [{"numeric": [">", 10]}]}
    assert check(pattern, {"n": [1, 2, 30]}) is True
    assert check(pattern, {"n": [1, 2, True]}) is False


# --- anything-but -------------------------------------------------------------------------------


def test_anything_but_a_list() -> None:
    pattern = {"state": [{"anything-but": ["initializing", "stopped"]}]}
    assert check(pattern, {"state": "running"}) is True
    assert check(pattern, {"state": "stopped"}) is False
    assert check(pattern, {}) is False  # the field must be present


def test_anything_but_a_single_value() -> None:
    assert check({"n": [{"anything-but": 0}]}, {"n": 1}) is True
    assert check({"n": [{"anything-but": 0}]}, {"n": 0}) is False
    assert check({"s": [{"anything-but": "x"}]}, {"s": "y"}) is True


def test_anything_but_keeps_booleans_apart_from_numbers() -> None:
    assert check({"n": [{"anything-but": [1]}]}, {"n": True}) is True
    assert check({"n": [{"anything-but": [True]}]}, {"n": True}) is False
    assert check({"n": [{"anything-but": [True]}]}, {"n": 1}) is True


# --- nesting and payload shapes -----------------------------------------------------------------


def test_nested_patterns() -> None:
    pattern = {"detail": {"bucket": ["landing"], "object": {"key": [{"prefix": "deliveries/"}]}}}
    good = {"detail": {"bucket": "landing", "object": {"key": "deliveries/1.csv", "size": 3}}}
    assert check(pattern, good) is True
    assert check(pattern, {"detail": {"bucket": "landing", "object": {"key": "other/1.csv"}}}) is False
    assert check(pattern, {"detail": {"bucket": "landing"}}) is False
    assert check(pattern, {"detail": "landing"}) is False
    assert check(pattern, {}) is False


@pytest.mark.parametrize("payload", ["text", 42, None, ["kind", "order"], True])
def test_non_object_payloads_match_nothing(payload: Any) -> None:
    assert check({"kind": [{"exists": False}]}, payload) is False
    assert check({"kind": ["order"]}, payload) is False


# --- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ({}, "filter: a filter pattern must be a non-empty dict"),
        ([{"kind": ["x"]}], "a filter pattern must be a non-empty dict"),
        (
            {"kind": "order"},
            r"filter\.kind: expected a list .* got str \(write \['order'\] to match one value\)",
        ),
        ({"kind": 5}, r"got int \(write \[5\]"),
        ({"kind": []}, r"filter\.kind: an empty list matches nothing"),
        ({"a": {"b": {}}}, r"filter\.a\.b: a filter pattern must be a non-empty dict"),
        ({"a": {"b": "x"}}, r"filter\.a\.b: expected a list"),
        (
            {"k": [{"wildcard": "x*"}]},
            r"filter\.k: unknown matcher 'wildcard'; use one of \['anything-but', 'exists'",
        ),
        ({"k": [{"prefix": "a", "suffix": "b"}]}, "a matcher is a dict with one key"),
        ({"k": [["nested", "list"]]}, "a matcher is a dict with one key"),
        ({"k": [{"prefix": 1}]}, "prefix takes a string"),
        ({"k": [{"suffix": None}]}, "suffix takes a string"),
        ({"k": [{"exists": "yes"}]}, "exists takes true or false"),
        ({"k": [{"exists": 1}]}, "exists takes true or false"),
        ({"k": [{"numeric": []}]}, r"numeric takes pairs such as \['>', 0, '<=', 5\]"),
        ({"k": [{"numeric": [">", 0, "<"]}]}, "numeric takes pairs"),
        ({"k": [{"numeric": ">"}]}, "numeric takes pairs"),
        ({"k": [{"numeric": ["!=", 0]}]}, r"numeric pair '!=', 0 needs one of \['<', '<=', '=', '>=', '>'\]"),
        ({"k": [{"numeric": [">", "0"]}]}, "numeric pair '>', '0'"),
        ({"k": [{"numeric": [">", True]}]}, "numeric pair '>', True"),
        ({"k": [{"anything-but": None}]}, "anything-but takes a value or a list of values"),
        ({"k": [{"anything-but": {"prefix": "x"}}]}, "anything-but takes a value or a list"),
    ],
)
def test_invalid_patterns_explain_themselves(pattern: Any, message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        validate_pattern(pattern)


def test_validation_path_prefix_is_the_callers() -> None:
    with pytest.raises(DefinitionError, match=r"^SqsQueue\('q'\) filter\.a: an empty list"):
        validate_pattern({"a": []}, "SqsQueue('q') filter")


def test_valid_patterns_pass() -> None:
    validate_pattern(
        {
            "a": ["x", 1, 2.5, True, None],
            "b": [{"prefix": ""}, {"suffix": "z"}, {"exists": False}],
            "c": [{"numeric": ["=", 0]}, {"anything-but": ["q", 1]}, {"anything-but": "r"}],
            "d": {"e": {"f": [{"numeric": [">", -1, "<", 1.5]}]}},
            "g": ("tuple", "works"),
        }
    )


# --- extract_field ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "path", "expected"),
    [
        ({"day": "2026-11-21"}, "day", "2026-11-21"),
        ({"meta": {"day": "2026-11-21"}}, "meta.day", "2026-11-21"),
        ({"a": {"b": {"c": 0}}}, "a.b.c", 0),
        ({"a": {"b": {"c": False}}}, "a.b.c", False),
        ({"a": {"b": [1, 2]}}, "a.b", [1, 2]),
        ({"a": {"b": {"c": 1}}}, "a.b", {"c": 1}),
        ({"a": {}}, "a.b", None),
        ({"a": "text"}, "a.b", None),
        ({"a": [{"b": 1}]}, "a.b", None),
        ("text", "a", None),
        (None, "a", None),
        ({}, "a", None),
    ],
)
def test_extract_field(payload: Any, path: str, expected: Any) -> None:
    assert extract_field(payload, path) == expected
