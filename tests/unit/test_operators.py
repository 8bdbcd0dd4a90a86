"""The event operators (at_least, where, then, failed, late) on queue views, against a reference model."""

from __future__ import annotations

import copy
import pickle
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assetflow import Asset, AssetAlias, DefinitionError, at_least, late
from assetflow.core.conditions import (
    AssetAll,
    AssetAny,
    AtLeast,
    Condition,
    Failed,
    Late,
    Then,
    Where,
    condition_from_json,
)
from assetflow.core.decision import QueueView
from assetflow.core.entries import QueueEntry
from assetflow.core.errors import DocumentError
from assetflow.core.events import AssetEvent

T0 = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
A, B, C = (Asset(f"x-test://{n}") for n in "abc")
L = AssetAlias("exports")
OK = {"status": ["ok"]}
BIG = {"rows": [{"numeric": [">", 100]}]}


def entry(
    asset: Asset,
    n: int,
    *,
    kind: str = "event",
    aliases: tuple[str, ...] = (),
    wheres: tuple[str, ...] = (),
    seconds: float | None = None,
) -> QueueEntry:
    source = {"type": kind} if kind != "event" else {"type": "api"}
    event = AssetEvent(
        asset=asset.uri,
        id=f"{kind[0]}{n:04d}",
        timestamp=T0 + timedelta(seconds=n if seconds is None else seconds),
        source=source,
    )
    return QueueEntry(event, aliases, wheres)


def view(
    *entries: QueueEntry, now: datetime = T0 + timedelta(hours=1), within: timedelta | None = None
) -> QueueView:
    return QueueView(entries, now=now, within=within)


# --- construction ---------------------------------------------------------------------------------


def test_operators_build_from_the_authoring_names() -> None:
    assert isinstance(at_least(A, 3), AtLeast)
    assert isinstance(A.where(OK), Where)
    assert isinstance(L.where(OK), Where)
    assert isinstance(A.then(B, within=timedelta(minutes=5)), Then)
    assert isinstance(A.failed(), Failed)
    assert isinstance(late(A), Late)
    tree = (at_least(A, 2) & A.then(B)) | late(C) | L.where(OK)
    assert isinstance(tree, AssetAny)
    assert repr(A.failed()) == "Asset('x-test://a').failed()"


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: at_least(A & B, 2), "at_least\\(\\) takes an asset.*not AssetAll"),
        (lambda: at_least(A, 0), "n must be a whole number from 1 to 10000"),
        (lambda: at_least(A, True), "n must be a whole number"),
        (lambda: A.then(A | B), "then\\(\\) takes an asset"),
        (lambda: A.then(B, within=timedelta(0)), "within must be a positive timedelta"),
        (lambda: A.then(B, within=5), "within must be a positive timedelta"),  # type: ignore[arg-type]
        (lambda: A.where({}), "non-empty dict"),
        (lambda: A.where({"x": "ok"}), "expected a list of allowed values"),
        (lambda: A.where(OK).where(BIG), "put every field in one pattern"),
        (lambda: late(L), "late\\(\\) applies to an asset, not AssetAlias"),  # type: ignore[arg-type]
        (lambda: Where(A & B, OK), "where\\(\\) applies to an asset or an alias"),
    ],
)
def test_bad_operators_are_refused(build: Any, message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        build()


def test_where_keys_are_stable_and_differ_by_target_and_pattern() -> None:
    key = A.where(OK).where_key
    assert key == A.where({"status": ["ok"]}).where_key  # same content, same key, in any process
    assert key.startswith("w-") and len(key) == 18
    assert len({key, B.where(OK).where_key, A.where(BIG).where_key, L.where(OK).where_key}) == 4
    assert A.where(OK) == A.where(OK) and hash(A.where(OK)) == hash(A.where(OK))


@pytest.mark.parametrize(
    "node",
    [
        at_least(A, 3),
        at_least(L.where(OK), 2),
        A.where(OK),
        L.where(BIG),
        A.then(B, within=timedelta(minutes=5)),
        A.then(B),
        at_least(A.then(B), 2).then(C, within=timedelta(seconds=30)),
        A.failed(),
        late(B),
        (at_least(A, 2) & B.where(OK)) | A.failed() | late(C),
    ],
    ids=repr,
)
def test_operators_round_trip_copy_and_pickle(node: Condition) -> None:
    assert condition_from_json(node.to_json()) == node
    assert copy.deepcopy(node) == node
    assert pickle.loads(pickle.dumps(node)) == node  # noqa: S301  (our own bytes)
    assert hash(condition_from_json(node.to_json())) == hash(node)


def test_operator_documents() -> None:
    assert at_least(A, 3).to_json() == {
        "type": "at_least",
        "of": {"type": "asset", "uri": "x-test://a"},
        "n": 3,
    }
    assert A.then(B, within=timedelta(minutes=1)).to_json() == {
        "type": "then",
        "first": {"type": "asset", "uri": "x-test://a"},
        "then": {"type": "asset", "uri": "x-test://b"},
        "within_seconds": 60.0,
    }
    assert A.failed().to_json() == {"type": "failed", "of": {"type": "asset", "uri": "x-test://a"}}
    assert late(A).to_json() == {"type": "late", "of": {"type": "asset", "uri": "x-test://a"}}
    where = A.where(OK).to_json()
    assert where == {"type": "where", "of": A.to_json(), "pattern": OK, "key": A.where(OK).where_key}


def test_a_where_document_with_a_foreign_key_is_refused() -> None:
    doc = {**A.where(OK).to_json(), "key": "w-0000000000000000"}
    with pytest.raises(DocumentError, match="its content gives"):
        condition_from_json(doc)


@pytest.mark.parametrize(
    "doc",
    [
        {"type": "at_least", "of": {"type": "asset", "uri": "a"}, "n": 0},
        {"type": "at_least", "of": {"type": "all", "of": [{"type": "asset", "uri": "a"}]}, "n": 2},
        {"type": "then", "first": {"type": "asset", "uri": "a"}},
        {"type": "where", "of": {"type": "asset", "uri": "a"}, "pattern": {}},
        {"type": "failed", "of": {"type": "alias", "name": "x"}},
        {"type": "late"},
    ],
)
def test_bad_operator_documents_are_refused(doc: dict[str, Any]) -> None:
    with pytest.raises(DocumentError):
        condition_from_json(doc)


def test_any_of_leaves_for_the_operators() -> None:
    assert A.where(OK).is_any_of_leaves()
    assert (A.failed() | late(B) | L.where(OK)).is_any_of_leaves()
    assert at_least(A, 1).is_any_of_leaves()
    assert not at_least(A, 2).is_any_of_leaves()
    assert not A.then(B).is_any_of_leaves()


def test_operators_name_their_assets_and_aliases() -> None:
    tree = at_least(L.where(OK), 2) | A.then(B) | C.failed() | late(A)
    assert list(tree.iter_aliases()) == [L]
    assert [a.uri for a in tree.iter_assets()] == ["x-test://a", "x-test://b", "x-test://c", "x-test://a"]
    # failed and late are not updates: they are not subjects of "x of N assets updated"
    assert dict(tree.subjects()) == {
        "l:exports": "alias:exports",
        "a:x-test://a": "x-test://a",
        "a:x-test://b": "x-test://b",
    }


# --- semantics --------------------------------------------------------------------------------------


def test_at_least_counts_entries() -> None:
    cond = at_least(A, 3)
    assert not cond.holds(view(entry(A, 1), entry(A, 2), entry(B, 3)))
    assert cond.holds(view(entry(A, 1), entry(A, 2), entry(A, 3)))
    assert at_least(L, 2).holds(view(entry(B, 1, aliases=("exports",)), entry(C, 2, aliases=("exports",))))


def test_where_counts_only_matching_entries() -> None:
    where = A.where(OK)
    matched = entry(A, 1, wheres=(where.where_key,))
    assert not where.holds(view(entry(A, 2)))
    assert where.holds(view(matched))
    assert at_least(where, 2).holds(view(matched, entry(A, 3, wheres=(where.where_key,))))
    assert A.holds(view(matched))  # a plain leaf counts every event of its asset


def test_then_needs_the_order_and_the_window() -> None:
    seq = A.then(B, within=timedelta(seconds=10))
    assert seq.holds(view(entry(A, 1), entry(B, 5)))
    assert not seq.holds(view(entry(B, 1), entry(A, 5)))  # b before a
    assert not seq.holds(view(entry(A, 1), entry(B, 12)))  # 11 s later: outside the window
    assert seq.holds(view(entry(A, 1), entry(A, 4), entry(B, 12)))  # the later a is within 10 s
    assert seq.holds(view(entry(A, 1), entry(B, 11)))  # exactly the window counts
    # equal timestamps are ordered by id
    same = view(entry(A, 1, seconds=3), entry(B, 2, seconds=3))
    assert A.then(B).holds(same) and not B.then(A).holds(same)
    assert not A.then(A).holds(view(entry(A, 1)))  # two distinct events
    assert A.then(A).holds(view(entry(A, 1), entry(A, 2)))


def test_failed_and_late_count_only_their_synthetic_entries() -> None:
    failure = entry(A, 1, kind="failure")
    lateness = entry(A, 2, kind="late")
    assert A.failed().holds(view(failure)) and not A.holds(view(failure))
    assert late(A).holds(view(lateness)) and not A.failed().holds(view(lateness))
    assert not A.failed().holds(view(entry(A, 3)))


def test_within_makes_old_events_ineligible_but_not_failures() -> None:
    now = T0 + timedelta(seconds=100)
    old, recent = entry(A, 1), entry(B, 95)
    assert not (A & B).holds(view(old, recent, now=now, within=timedelta(seconds=30)))
    assert (A & B).holds(view(old, recent, now=now, within=timedelta(seconds=200)))
    assert A.failed().holds(view(entry(A, 1, kind="failure"), now=now, within=timedelta(seconds=30)))
    assert view(old, recent, now=now, within=timedelta(seconds=30)).old == 1


def test_reports_and_needs() -> None:
    where = B.where(OK)
    cond = at_least(A, 2) & where
    v = view(entry(A, 1), entry(B, 2), entry(B, 3, wheres=(where.where_key,)), entry(B, 4))
    report = cond.report(v)
    assert report["op"] == "all" and report["value"] is False
    count, match = report["children"]
    assert count == {
        "op": "at_least",
        "value": False,
        "n": 2,
        "queued": 1,
        "children": [{"op": "asset", "value": True, "uri": "x-test://a", "queued": 1}],
    }
    assert match == {
        "op": "where",
        "value": True,
        "uri": "x-test://b",
        "pattern": OK,
        "key": where.where_key,
        "queued": 1,
        "missed": 2,
    }
    assert cond.needs(v) == ["x-test://a"]
    assert (A.then(B)).needs(view()) == ["x-test://a", "x-test://b"]
    assert (A.then(B)).needs(view(entry(A, 1))) == ["x-test://b"]
    assert ((A & B) | C).needs(view(entry(A, 1))) == ["x-test://b"]  # the cheapest branch
    assert ((A & B) | L).needs(view()) == ["alias:exports"]
    assert A.failed().report(view()) == {"op": "failed", "value": False, "uri": "x-test://a", "queued": 0}


# --- the reference model ----------------------------------------------------------------------------

WHERES = [A.where(OK), B.where(BIG), L.where(OK)]
WINDOWS = [None, timedelta(seconds=2), timedelta(seconds=5)]


def nodes() -> st.SearchStrategy[Condition]:
    leaves = st.sampled_from([A, B, C, L, *WHERES, A.failed(), B.failed(), late(A), late(C)])
    streams = st.recursive(
        leaves,
        lambda inner: (
            st.builds(at_least, inner, st.integers(1, 3))
            | st.builds(lambda x, y, w: x.then(y, within=w), inner, inner, st.sampled_from(WINDOWS))
        ),
        max_leaves=4,
    )
    return st.recursive(
        streams,
        lambda kids: (
            st.builds(lambda xs: AssetAll(*xs), st.lists(kids, min_size=1, max_size=3))
            | st.builds(lambda xs: AssetAny(*xs), st.lists(kids, min_size=1, max_size=3))
        ),
        max_leaves=8,
    )


@dataclass(frozen=True)
class ModelEntry:
    id: str
    ts: datetime
    kind: str
    asset: str
    aliases: frozenset[str]
    wheres: frozenset[str]


def model_selects(node: Condition, e: ModelEntry) -> bool:
    if isinstance(node, Asset):
        return e.kind == "event" and e.asset == node.uri
    if isinstance(node, AssetAlias):
        return e.kind == "event" and node.name in e.aliases
    if isinstance(node, Where):
        return e.kind == "event" and node.where_key in e.wheres
    if isinstance(node, Failed):
        return e.kind == "failure" and e.asset == node.uri
    assert isinstance(node, Late)
    return e.kind == "late" and e.asset == node.uri


def model_times(node: Condition, entries: list[ModelEntry]) -> list[tuple[datetime, str]]:
    """Brute force, by the documented definitions."""
    if isinstance(node, AtLeast):
        return sorted(model_times(node.of, entries))[node.n - 1 :]
    if isinstance(node, Then):
        firsts = model_times(node.first, entries)
        return [
            y
            for y in sorted(model_times(node.second, entries))
            if any(x < y and (node.within is None or y[0] - x[0] <= node.within) for x in firsts)
        ]
    return sorted((e.ts, e.id) for e in entries if model_selects(node, e))


def model_holds(node: Condition, entries: list[ModelEntry]) -> bool:
    if isinstance(node, AssetAll):
        return all(model_holds(c, entries) for c in node.children)
    if isinstance(node, AssetAny):
        return any(model_holds(c, entries) for c in node.children)
    return bool(model_times(node, entries))


model_entries = st.lists(
    st.tuples(
        st.sampled_from(["event", "event", "event", "failure", "late"]),
        st.sampled_from([A, B, C]),
        st.integers(0, 10),
        st.sets(st.sampled_from(["exports"])),
        st.sets(st.sampled_from([w.where_key for w in WHERES])),
    ),
    max_size=12,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cond=nodes(),
    raw=model_entries,
    within=st.sampled_from([None, timedelta(seconds=4)]),
    now_s=st.integers(0, 14),
)
def test_operators_evaluate_like_the_model(cond: Condition, raw: list[Any], within: Any, now_s: int) -> None:
    now = T0 + timedelta(seconds=now_s)
    entries, model = [], []
    for n, (kind, asset, second, aliases, wheres) in enumerate(raw):
        real = kind == "event"
        e = entry(
            asset,
            n,
            kind=kind,
            aliases=tuple(sorted(aliases)) if real else (),
            wheres=tuple(sorted(wheres)) if real else (),
            seconds=second,
        )
        entries.append(e)
        cutoff = None if within is None else now - within
        if real and cutoff is not None and e.event.timestamp < cutoff:
            continue
        model.append(
            ModelEntry(
                e.event.id, e.event.timestamp, kind, asset.uri, frozenset(e.aliases), frozenset(e.wheres)
            )
        )
    v = QueueView(entries, now=now, within=within)
    assert cond.holds(v) is model_holds(cond, model)
    assert condition_from_json(cond.to_json()) == cond
    # needs() names what is missing exactly when the condition does not hold
    assert bool(cond.needs(v)) is not cond.holds(v)
    report = cond.report(v)
    assert report["value"] is cond.holds(v)
