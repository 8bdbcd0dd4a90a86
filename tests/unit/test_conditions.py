"""Asset conditions: assets, aliases and the & / | trees built from them (DESIGN §1, §3.2-3.3)."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assetflow import Asset, AssetAlias, AssetAll, AssetAny, AssetUriError, DefinitionError
from assetflow.core.conditions import AssetRef, as_condition, condition_from_json
from assetflow.core.errors import DocumentError
from assetflow.core.jsonvalue import freeze_json, thaw_json

A = Asset("s3://bucket/a")
B = Asset("s3://bucket/b")
C = Asset("s3://bucket/c")
D = Asset("s3://bucket/d")
L = AssetAlias("exports")
M = AssetAlias("alerts")


# --- identity ---------------------------------------------------------------------------------


def test_asset_identity_is_the_normalised_uri_only() -> None:
    plain = Asset("s3://bucket/a")
    named = Asset("nice", "S3://bucket/a/", extra={"owner": "team"})

    assert named.uri == "s3://bucket/a"
    assert plain == named
    assert hash(plain) == hash(named)
    assert len({plain, named}) == 1


def test_asset_name_defaults_to_the_uri() -> None:
    assert Asset("s3://bucket/a").name == "s3://bucket/a"
    assert Asset("orders", "s3://bucket/a").name == "orders"


# Airflow 3.3's constructor (task SDK ``Asset.__init__``): one argument alone is both name and URI.
@pytest.mark.parametrize(
    ("build", "name", "uri"),
    [
        (lambda: Asset("s3://bucket/a"), "s3://bucket/a", "s3://bucket/a"),
        (lambda: Asset("orders"), "orders", "orders"),
        (lambda: Asset(name="orders"), "orders", "orders"),
        (lambda: Asset(uri="s3://bucket/a"), "s3://bucket/a", "s3://bucket/a"),
        (lambda: Asset("orders", "s3://bucket/a"), "orders", "s3://bucket/a"),
        (lambda: Asset(name="orders", uri="s3://bucket/a"), "orders", "s3://bucket/a"),
        (lambda: Asset(uri="S3://bucket/a/", name="orders"), "orders", "s3://bucket/a"),
        # the name keeps what was written; the URI is normalised (identity)
        (lambda: Asset("S3://bucket/a/"), "S3://bucket/a/", "s3://bucket/a"),
    ],
)
def test_asset_constructor_follows_airflow(build: Any, name: str, uri: str) -> None:
    asset = build()
    assert (asset.name, asset.uri, asset.group) == (name, uri, "asset")


def test_asset_needs_a_name_or_a_uri() -> None:
    with pytest.raises(DefinitionError, match=r"needs a name or a uri: Asset\(name, uri\)"):
        Asset()


def test_the_old_uri_then_name_keyword_call_is_a_type_error_as_in_airflow() -> None:
    with pytest.raises(TypeError, match="multiple values for argument 'name'"):
        Asset("s3://bucket/a", name="orders")  # type: ignore[misc]


def test_named_says_whether_the_name_was_given_beside_the_uri() -> None:
    assert Asset("orders", "s3://bucket/a").named
    assert not Asset("s3://bucket/a").named
    assert not Asset(name="orders").named
    assert not Asset(uri="s3://bucket/a").named


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "x" * 1501, "uri": "s3://bucket/a"}, "name cannot exceed 1500 characters"),
        ({"name": "naïve", "uri": "s3://bucket/a"}, "name must only consist of ASCII characters"),
        ({"name": "a", "uri": "s3://bucket/a", "group": ""}, "group must be a non-empty string"),
        ({"name": "a", "uri": "s3://bucket/a", "group": "ünï"}, "group must only consist of ASCII"),
        ({"name": "a", "uri": 5}, "uri must be a string, not int"),
        ({"name": "a", "uri": "s3://bucket/a", "expect": "daily"}, "expect must be an ExpectedArrival"),
        ({"name": "a", "uri": "s3://bucket/a", "watchers": "q"}, "watchers must be a list"),
    ],
)
def test_asset_arguments_are_checked(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        Asset(**kwargs)


def test_asset_group_and_alias_group() -> None:
    assert Asset("a", "s3://bucket/a", group="ml").group == "ml"
    alias = AssetAlias("exports", group="reports")
    assert alias.group == "reports"
    assert alias == AssetAlias("exports")  # the group never changes identity
    assert copy.deepcopy(alias).group == "reports"
    with pytest.raises(DefinitionError, match="group must be a non-empty string"):
        AssetAlias("exports", group=" ")


def test_asset_ref_takes_one_of_name_and_uri() -> None:
    assert Asset.ref(name="orders") == AssetRef(name="orders")
    assert Asset.ref(uri="S3://bucket/a/").ref_uri == "s3://bucket/a"
    assert repr(Asset.ref(name="orders")) == "Asset.ref(name='orders')"
    for kwargs in ({}, {"name": "a", "uri": "s3://bucket/a"}):
        with pytest.raises(DefinitionError, match="exactly one of name= or uri="):
            Asset.ref(**kwargs)


def test_an_unresolved_ref_cannot_be_evaluated() -> None:
    ref = Asset.ref(name="orders")
    with pytest.raises(DefinitionError, match="resolved when the catalog is built"):
        (ref & A).evaluate({"s3://bucket/a"})
    resolved = (ref & A).resolve(lambda r: Asset("orders", "s3://bucket/o"))
    assert resolved == Asset("s3://bucket/o") & A
    assert list((ref | A).iter_refs()) == [ref]


def test_assets_with_different_uris_differ() -> None:
    assert A != B
    assert len({A, B, Asset("s3://bucket/a")}) == 2


def test_alias_identity_is_its_name() -> None:
    assert AssetAlias("exports") == L
    assert hash(AssetAlias("exports")) == hash(L)
    assert AssetAlias("exports") != AssetAlias("Exports")


def test_an_asset_never_equals_an_alias_of_the_same_text() -> None:
    assert Asset("exports") != AssetAlias("exports")
    assert len({Asset("exports"), AssetAlias("exports")}) == 2


def test_groups_compare_by_kind_and_children() -> None:
    assert AssetAll(A, B) == (A & B)
    assert (A & B) != (A | B)
    assert (A & B) != (B & A)  # children keep their order
    assert hash(A & B) == hash(AssetAll(Asset("s3://bucket/a"), Asset("s3://bucket/b")))
    assert AssetAll(A) != A


def test_repr_names_the_uri_and_the_tree() -> None:
    assert repr(A) == "Asset('s3://bucket/a')"
    assert repr(L) == "AssetAlias('exports')"
    assert (
        repr((A & B) | L)
        == "AssetAny(AssetAll(Asset('s3://bucket/a'), Asset('s3://bucket/b')), AssetAlias('exports'))"
    )


# --- validation -------------------------------------------------------------------------------


def test_invalid_uri_is_refused() -> None:
    with pytest.raises(AssetUriError, match="reserved"):
        Asset("airflow://x")


@pytest.mark.parametrize("name", ["", "   ", 3])
def test_asset_name_must_be_non_empty_string(name: object) -> None:
    with pytest.raises(DefinitionError, match="name must be a non-empty string"):
        Asset(name, "s3://bucket/a")  # type: ignore[arg-type]


def test_asset_extra_must_be_a_dict() -> None:
    with pytest.raises(DefinitionError, match="extra must be a dict, not list"):
        Asset("s3://bucket/a", extra=[1, 2])  # type: ignore[arg-type]


@pytest.mark.parametrize("extra", [{"when": object()}, {"x": float("nan")}, {"s": {1, 2}}])
def test_asset_extra_must_be_json(extra: dict[str, Any]) -> None:
    with pytest.raises(DefinitionError, match="JSON-serialisable"):
        Asset("s3://bucket/a", extra=extra)


def test_asset_watchers_must_be_watchers() -> None:
    with pytest.raises(DefinitionError, match="watchers must be AssetWatcher objects, not str"):
        Asset("s3://bucket/a", watchers=["queue"])  # type: ignore[list-item]


@pytest.mark.parametrize("name", ["", "  ", "x" * 201, "naïve", "tab\there", None])
def test_alias_name_rules(name: object) -> None:
    with pytest.raises(DefinitionError, match="AssetAlias name"):
        AssetAlias(name)  # type: ignore[arg-type]


def test_alias_name_of_200_characters_is_accepted() -> None:
    assert AssetAlias("x" * 200).name == "x" * 200


def test_group_refuses_non_conditions() -> None:
    with pytest.raises(DefinitionError, match="AssetAll takes assets, aliases or conditions, not str"):
        AssetAll(A, "s3://bucket/b")  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match="AssetAny needs at least one"):
        AssetAny()


# --- immutability -----------------------------------------------------------------------------


def test_asset_attributes_cannot_be_set() -> None:
    with pytest.raises(AttributeError, match="immutable"):
        A.uri = "s3://bucket/other"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        A.new_attribute = 1  # type: ignore[attr-defined]


def test_asset_extra_is_a_frozen_copy() -> None:
    source = {"owner": "team", "tags": ["a"]}
    asset = Asset("s3://bucket/a", extra=source)
    source["owner"] = "changed"
    source["tags"].append("b")

    assert asset.extra["owner"] == "team"
    assert asset.extra["tags"] == ("a",)
    with pytest.raises(TypeError):
        asset.extra["owner"] = "x"  # type: ignore[index]


def test_alias_and_groups_cannot_be_set() -> None:
    with pytest.raises(AttributeError, match="AssetAlias is immutable"):
        L.name = "other"  # type: ignore[misc]
    group = A & B
    with pytest.raises(AttributeError, match="AssetAll is immutable"):
        group.children = ()  # type: ignore[misc]
    assert isinstance(group.children, tuple)


def test_attributes_cannot_be_deleted() -> None:
    asset = Asset("s3://bucket/a")
    with pytest.raises(AttributeError):
        del asset.uri  # type: ignore[misc]
    assert asset.uri == "s3://bucket/a"


def test_assets_can_be_copied() -> None:
    asset = Asset("a", "s3://bucket/a", group="g", extra={"k": [1]})
    pickled = pickle.loads(pickle.dumps(asset))  # noqa: S301  (our own bytes)
    for clone in (copy.copy(asset), copy.deepcopy(asset), pickled):
        assert clone == asset
        assert (clone.name, clone.group, clone.extra, clone.named) == ("a", "g", asset.extra, True)
    single = Asset("S3://bucket/a/")
    assert (copy.deepcopy(single).name, copy.deepcopy(single).named) == ("S3://bucket/a/", False)


# --- composing --------------------------------------------------------------------------------


def test_and_or_build_groups() -> None:
    assert isinstance(A & B, AssetAll)
    assert isinstance(A | B, AssetAny)
    assert (A & L).children == (A, L)
    assert (L | A).children == (L, A)


def test_same_kind_groups_flatten_on_both_sides() -> None:
    assert (A & B & C).children == (A, B, C)
    assert (A & (B & C)).children == (A, B, C)
    assert ((A & B) & (C & D)).children == (A, B, C, D)
    assert (A | B | C | D).children == (A, B, C, D)
    assert AssetAll(AssetAll(A, B), C) == AssetAll(A, B, C)


def test_different_kinds_nest_without_flattening() -> None:
    tree = (A & B) | (C & (D | L))
    assert isinstance(tree, AssetAny)
    assert tree.children == (AssetAll(A, B), AssetAll(C, AssetAny(D, L)))


def test_deep_nesting() -> None:
    tree: Any = A
    for depth in range(60):
        tree = (tree | B) if depth % 2 else (tree & C)
    assert tree.evaluate({"s3://bucket/b"}) is True
    assert tree.evaluate({"s3://bucket/a"}) is False
    assert condition_from_json(tree.to_json()) == tree


@pytest.mark.parametrize("other", [1, "s3://bucket/b", None, [B]])
def test_foreign_operands_raise_type_error(other: object) -> None:
    with pytest.raises(TypeError):
        A & other  # type: ignore[operator]
    with pytest.raises(TypeError):
        A | other  # type: ignore[operator]
    with pytest.raises(TypeError):
        other & A  # type: ignore[operator]


def test_dunder_methods_return_not_implemented_for_foreign_operands() -> None:
    assert A.__and__(1) is NotImplemented
    assert (A | B).__or__("x") is NotImplemented
    assert A.__eq__("s3://bucket/a") is NotImplemented
    assert A != "s3://bucket/a"


def test_list_schedule_means_all_of() -> None:
    assert as_condition([A, B, L], "s") == AssetAll(A, B, L)
    assert as_condition((A, B), "s") == AssetAll(A, B)
    assert as_condition([A], "s") is A
    assert as_condition(A | B, "s") == AssetAny(A, B)


def test_as_condition_refuses_empty_lists_and_other_values() -> None:
    with pytest.raises(DefinitionError, match="empty list of assets can never be satisfied"):
        as_condition([], "pipeline 'p' schedule")
    with pytest.raises(DefinitionError, match=r"expected an Asset.*got str"):
        as_condition("s3://bucket/a", "pipeline 'p' schedule")
    with pytest.raises(DefinitionError, match="not int"):
        as_condition([A, 1], "s")


# --- evaluate ---------------------------------------------------------------------------------


def test_evaluate_assets() -> None:
    tree = (A & B) | C
    assert tree.evaluate({"s3://bucket/a", "s3://bucket/b"}) is True
    assert tree.evaluate({"s3://bucket/c"}) is True
    assert tree.evaluate({"s3://bucket/a"}) is False
    assert tree.evaluate(set()) is False
    assert tree.evaluate(["s3://bucket/c"]) is True  # any iterable


def test_evaluate_aliases_by_name_only() -> None:
    tree = A & L
    assert tree.evaluate({"s3://bucket/a"}, {"exports"}) is True
    assert tree.evaluate({"s3://bucket/a"}) is False
    # a URI equal to the alias name does not make the alias true
    assert tree.evaluate({"s3://bucket/a", "exports"}) is False
    assert L.evaluate(set(), ["exports"]) is True


def test_iter_assets_and_aliases_keep_duplicates_depth_first() -> None:
    tree = (A & L) | (B & A) | M
    assert list(tree.iter_assets()) == [A, B, A]
    assert list(tree.iter_aliases()) == [L, M]
    assert list(A.iter_aliases()) == []
    assert list(L.iter_assets()) == []


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        (A, True),
        (L, True),
        (A | B, True),
        (A | L | B, True),
        (AssetAll(A), True),
        (AssetAll(A | B), True),
        (A | AssetAll(B), True),
        (A & B, False),
        (A & L, False),
        ((A & B) | C, False),
        (A | (B & C), False),
    ],
)
def test_is_any_of_leaves(condition: Any, expected: bool) -> None:
    assert condition.is_any_of_leaves() is expected


# --- JSON -------------------------------------------------------------------------------------


def test_to_json_shapes() -> None:
    assert A.to_json() == {"type": "asset", "uri": "s3://bucket/a"}
    assert L.to_json() == {"type": "alias", "name": "exports"}
    assert ((A & B) | L).to_json() == {
        "type": "any",
        "of": [
            {
                "type": "all",
                "of": [{"type": "asset", "uri": "s3://bucket/a"}, {"type": "asset", "uri": "s3://bucket/b"}],
            },
            {"type": "alias", "name": "exports"},
        ],
    }


def test_asset_json_leaves_out_name_and_extra() -> None:
    assert Asset("n", "s3://bucket/a", extra={"k": 1}).to_json() == {
        "type": "asset",
        "uri": "s3://bucket/a",
    }


@pytest.mark.parametrize(
    "doc",
    [
        {"type": "all", "of": []},
        {"type": "any"},
        {"type": "nand", "of": [{"type": "asset", "uri": "a"}]},
        {},
        [],
        "asset",
    ],
)
def test_condition_from_json_refuses_bad_documents(doc: Any) -> None:
    with pytest.raises(DocumentError):
        condition_from_json(doc)


@pytest.mark.parametrize(
    "doc",
    [{"type": "asset"}, {"type": "alias"}, {"type": "asset", "uri": "airflow://x"}],
)
def test_condition_from_json_wraps_every_failure_in_document_error(doc: dict[str, Any]) -> None:
    with pytest.raises(DocumentError):
        condition_from_json(doc)


def test_freeze_and_thaw_json() -> None:
    frozen = freeze_json({"a": [1, {"b": 2}]}, "x")
    assert frozen["a"][1]["b"] == 2
    assert isinstance(frozen["a"], tuple)
    assert thaw_json(frozen) == {"a": [1, {"b": 2}]}
    assert type(thaw_json(frozen)["a"]) is list


# --- property: random trees -------------------------------------------------------------------

ASSET_POOL = [f"s3://bucket/p{i}" for i in range(4)]
ALIAS_POOL = ["la", "lb"]

Model = tuple[str, Any]  # ("asset", uri) | ("alias", name) | ("all"|"any", [Model, ...])

leaves: st.SearchStrategy[Model] = st.one_of(
    st.sampled_from(ASSET_POOL).map(lambda uri: ("asset", uri)),
    st.sampled_from(ALIAS_POOL).map(lambda name: ("alias", name)),
)
models: st.SearchStrategy[Model] = st.recursive(
    leaves,
    lambda kids: st.tuples(st.sampled_from(["all", "any"]), st.lists(kids, min_size=1, max_size=4)),
    max_leaves=16,
)


def build(model: Model, use_operators: bool) -> Any:
    kind, payload = model
    if kind == "asset":
        return Asset(payload)
    if kind == "alias":
        return AssetAlias(payload)
    children = [build(child, use_operators) for child in payload]
    if use_operators and len(children) > 1:
        result = children[0]
        for child in children[1:]:
            result = (result & child) if kind == "all" else (result | child)
        return result
    return AssetAll(*children) if kind == "all" else AssetAny(*children)


def model_holds(model: Model, assets: set[str], aliases: set[str]) -> bool:
    kind, payload = model
    if kind == "asset":
        return payload in assets
    if kind == "alias":
        return payload in aliases
    results = [model_holds(child, assets, aliases) for child in payload]
    return all(results) if kind == "all" else any(results)


def no_same_kind_nesting(doc: dict[str, Any]) -> bool:
    if doc["type"] in ("asset", "alias"):
        return True
    return all(child["type"] != doc["type"] and no_same_kind_nesting(child) for child in doc["of"])


@settings(max_examples=200, deadline=None)
@given(
    model=models,
    use_operators=st.booleans(),
    assets=st.sets(st.sampled_from(ASSET_POOL)),
    aliases=st.sets(st.sampled_from(ALIAS_POOL)),
)
def test_random_trees_round_trip_and_evaluate_like_the_model(
    model: Model, use_operators: bool, assets: set[str], aliases: set[str]
) -> None:
    condition = build(model, use_operators)

    doc = condition.to_json()
    assert condition_from_json(doc) == condition
    assert hash(condition_from_json(doc)) == hash(condition)
    assert no_same_kind_nesting(doc)
    assert condition.evaluate(assets, aliases) is model_holds(model, assets, aliases)


@settings(max_examples=100, deadline=None)
@given(model=models)
def test_operators_and_constructors_build_equal_trees(model: Model) -> None:
    by_operators = build(model, use_operators=True)
    by_constructors = build(model, use_operators=False)

    assert by_operators == by_constructors
    assert by_operators.to_json() == by_constructors.to_json()
