"""The asset graph as Mermaid and Graphviz DOT text."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assetflow import (
    Asset,
    AssetAlias,
    AssetAndTimeSchedule,
    AssetOrTimeSchedule,
    AssetWatcher,
    Catalog,
    CronPartitionTimetable,
    ExpectedArrival,
    HourlyMapper,
    KafkaTopic,
    PartitionedAssetSchedule,
    Pipeline,
    SparkJob,
    SqsQueue,
    at_least,
    late,
)
from assetflow.core.graph import _node_ids, condition_text, to_dot, to_mermaid
from assetflow.loader import load_catalog

PIPELINES = Path(__file__).resolve().parents[2] / "pipelines"
JOB = SparkJob("jobs/j.py")

A = Asset("alpha", "s3://bucket/a")
B = Asset("s3://bucket/b")
C = Asset("gamma", "s3://bucket/c")
L = AssetAlias("exports")


@pytest.fixture(scope="module")
def example() -> Catalog:
    return load_catalog(PIPELINES)


# --- condition_text -----------------------------------------------------------------------------


def test_condition_text_parenthesises_nested_groups() -> None:
    assert condition_text((A & B) | C) == "(s3://bucket/a & s3://bucket/b) | s3://bucket/c"
    assert condition_text(A & (B | C)) == "s3://bucket/a & (s3://bucket/b | s3://bucket/c)"
    assert condition_text(A & B & C) == "s3://bucket/a & s3://bucket/b & s3://bucket/c"


def test_condition_text_uses_names_and_marks_aliases() -> None:
    names = {"s3://bucket/a": "a", "s3://bucket/b": "b", "s3://bucket/c": "c"}
    assert condition_text((A & B) | C, names) == "(a & b) | c"
    assert condition_text(L | (A & L), names) == "alias:exports | (a & alias:exports)"
    assert condition_text(Asset("s3://bucket/unnamed"), names) == "s3://bucket/unnamed"


# --- the example graph --------------------------------------------------------------------------


def node_ids(text: str, pattern: str) -> set[str]:
    return set(re.findall(pattern, text, flags=re.MULTILINE))


def test_mermaid_has_every_node(example: Catalog) -> None:
    text = to_mermaid(example)
    assert text.startswith("flowchart LR\n")
    ids = _node_ids(example)
    declared = node_ids(text, r"^  (\w+)[\[\(\{]")
    assert declared == set(ids.values())
    assert len(declared) == 5 + 14 + 2 + 8
    for name in example.watchers:
        assert f'{ids[("watcher", name)]}[/"{name}<br/>' in text
    for uri in example.assets:
        assert uri in text
    assert '(["alias partner-exports"])' in text
    assert (
        '{{"ops_dashboard<br/>(curated_deliveries & iot_readings) | dashboard_refresh<br/>max 1 active"}}'
        in text
    )


def test_mermaid_edges(example: Catalog) -> None:
    ids = _node_ids(example)
    text = to_mermaid(example)
    watcher = ids[("watcher", "deliveries")]
    raw = ids[("asset", "s3://assetflow-demo/landing/deliveries")]
    etl = ids[("pipeline", "deliveries_etl")]
    curated = ids[("asset", "s3://assetflow-demo/curated/deliveries")]
    exports = ids[("alias", "partner-exports")]
    assert f"  {watcher} --> {raw}\n" in text
    assert f"  {raw} --> {etl}\n" in text
    assert f"  {etl} -->|on success| {curated}\n" in text
    assert f"  {ids[('pipeline', 'partner_exports')]} -->|on success| {exports}\n" in text
    assert f"  {exports} --> {ids[('pipeline', 'partner_feed_audit')]}\n" in text
    assert len(re.findall(r" --> | -->\|", text)) == 27


def test_dot_has_every_node_and_edge(example: Catalog) -> None:
    ids = _node_ids(example)
    text = to_dot(example)
    assert text.startswith("digraph assetflow {\n")
    assert text.endswith("}\n")
    assert node_ids(text, r"^  (\w+) \[label=") == set(ids.values())
    assert (
        f'  {ids[("watcher", "sensor-readings")]} [label="sensor-readings\\nKafka sensor-readings", shape=cds];'
        in text
    )
    assert (
        f'  {ids[("alias", "sensor-alerts")]} [label="alias sensor-alerts", shape=box, style=rounded];'
        in text
    )
    rollup = ids[("pipeline", "sensor_daily_rollup")]
    assert (
        f'  {rollup} [label="sensor_daily_rollup\\nsensor_readings\\npartitioned, daily\\nmax 1 active", shape=hexagon];'
        in text
    )
    assert (
        '[label="daily_report\\nops_dashboard\\nor cron 0 6 * * * UTC\\nmax 1 active", shape=hexagon];'
        in text
    )
    assert (
        '[label="deliveries_etl\\nraw_deliveries\\none run per event\\nmax 2 active", shape=hexagon];' in text
    )
    check = ids[("pipeline", "sensor_check")]
    assert f'  {check} -> {ids[("asset", "s3://assetflow-demo/iot/readings")]} [label="on success"];' in text
    assert f'  {check} -> {ids[("alias", "sensor-alerts")]} [label="on success"];' in text
    assert len(re.findall(r" -> ", text)) == 27


def test_an_asset_named_twice_in_a_condition_has_one_edge() -> None:
    catalog = Catalog.build([Pipeline("p", (A & B) | (A & C), JOB)])
    text = to_dot(catalog)
    ids = _node_ids(catalog)
    assert text.count(f"{ids[('asset', 's3://bucket/a')]} -> {ids[('pipeline', 'p')]};") == 1


# --- node ids and escaping ----------------------------------------------------------------------


def test_node_ids_do_not_collide_when_keys_sanitise_alike() -> None:
    assets = [
        "s3://bucket/x-y",
        "s3://bucket/x_y",
        "s3://bucket/x.y",
        "s3://bucket/" + "z" * 60,
        "s3://bucket/" + "z" * 61,
    ]
    catalog = Catalog(
        assets={u: Asset(u) for u in assets},
        aliases={"x-y": AssetAlias("x-y"), "x_y": AssetAlias("x_y")},
        pipelines={pid: Pipeline(pid, Asset(assets[0]), JOB) for pid in ("x-y", "x_y")},
    )
    ids = list(_node_ids(catalog).values())
    assert len(ids) == len(set(ids)) == 9
    assert all(re.fullmatch(r"[A-Za-z0-9_]+", i) for i in ids)


def dot_is_balanced(text: str) -> bool:
    depth = 0
    in_quotes = False
    escaped = False
    for char in text:
        if in_quotes:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_quotes = False
            elif char == "\n":
                return False  # a raw newline inside a string
            continue
        if char == '"':
            in_quotes = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0 and not in_quotes


def dot_label(text: str, node: str) -> str:
    """The label of a node, with DOT's escapes undone."""
    match = re.search(rf'^  {node} \[label="((?:[^"\\]|\\.)*)"', text, flags=re.MULTILINE)
    assert match, node
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), match.group(1))


AWKWARD = [
    'say "hi"',
    "back\\slash",
    "trailing\\",
    "brace } and [bracket]",
    'mixed "\\" end',
    "multi\nline",
    "semi; colon",
]


@pytest.mark.parametrize("name", AWKWARD)
def test_dot_escapes_awkward_labels(name: str) -> None:
    asset = Asset(name, "s3://bucket/a")
    catalog = Catalog(assets={asset.uri: asset}, aliases={}, pipelines={"p": Pipeline("p", asset, JOB)})
    text = to_dot(catalog)
    assert dot_is_balanced(text)
    node = _node_ids(catalog)[("asset", "s3://bucket/a")]
    assert dot_label(text, node) == f"{name}\ns3://bucket/a"


@pytest.mark.parametrize("name", AWKWARD)
def test_mermaid_labels_never_contain_a_raw_quote_or_newline(name: str) -> None:
    asset = Asset(name, "s3://bucket/a")
    catalog = Catalog(assets={asset.uri: asset}, aliases={}, pipelines={"p": Pipeline("p", asset, JOB)})
    for line in to_mermaid(catalog).splitlines()[1:]:
        label = re.search(r'"(.*)"', line)
        if label:
            assert '"' not in label.group(1)
    assert to_mermaid(catalog).count("\n") == 1 + 2 + 1  # header, two nodes, one edge


@settings(max_examples=40, deadline=None)
@given(
    names=st.lists(
        st.text(alphabet=st.sampled_from('ab"\\{}[]\n '), min_size=1, max_size=8).filter(str.strip),
        min_size=1,
        max_size=4,
    )
)
def test_dot_is_balanced_for_any_names(names: list[str]) -> None:
    assets = {f"s3://bucket/n{i}": Asset(n, f"s3://bucket/n{i}") for i, n in enumerate(names)}
    first = next(iter(assets.values()))
    pipelines = {"p": Pipeline("p", first, JOB, outlets=list(assets.values())[1:])}
    catalog = Catalog(assets=assets, aliases={}, pipelines=pipelines)
    assert dot_is_balanced(to_dot(catalog))


def test_graph_of_a_small_catalog_lists_everything() -> None:
    # Given a catalog with every kind of node and schedule
    catalog = Catalog.build(
        [
            Asset("alpha", "s3://bucket/a", watchers=[AssetWatcher("orders", SqsQueue("orders-queue"))]),
            Asset("s3://bucket/b", watchers=[AssetWatcher("clicks", KafkaTopic("clicks-topic"))]),
            Pipeline("p", A | B, JOB, outlets=[C, L], batch=False),
            Pipeline("q", AssetOrTimeSchedule("0 6 * * 1-5", L, timezone="Europe/Berlin"), JOB),
            Pipeline("r", PartitionedAssetSchedule(B, HourlyMapper()), JOB, max_active_runs=4),
        ]
    )

    # When both formats are drawn
    mermaid, dot = to_mermaid(catalog), to_dot(catalog)

    # Then each shows every node with its facts
    for text, newline in ((mermaid, "<br/>"), (dot, "\\n")):
        assert f"orders{newline}SQS orders-queue" in text
        assert f"clicks{newline}Kafka clicks-topic" in text
        assert f"alpha{newline}s3://bucket/a" in text
        assert f"gamma{newline}s3://bucket/c" in text
        assert "alias exports" in text
        assert f"p{newline}alpha | s3://bucket/b{newline}one run per event" in text
        assert f"q{newline}alias:exports{newline}or cron 0 6 * * 1-5 Europe/Berlin" in text
        assert f"r{newline}s3://bucket/b{newline}partitioned, hourly{newline}max 4 active" in text
    assert dot_is_balanced(dot)


def test_condition_text_of_the_operators() -> None:
    a, b = Asset("a", "s3://bucket/a"), Asset("s3://bucket/b")
    tree = (
        (at_least(a, 3) & b.where({"status": ["ok"]}))
        | a.then(b, within=timedelta(minutes=5))
        | b.failed()
        | late(a)
    )
    assert condition_text(tree, {"s3://bucket/a": "a"}) == (
        '(at_least(a, 3) & s3://bucket/b.where({"status":["ok"]})) | a.then(s3://bucket/b, within=0:05:00) '
        "| s3://bucket/b.failed() | late(a)"
    )


def test_labels_of_the_new_schedules() -> None:
    a = Asset("s3://bucket/a", expect=ExpectedArrival("@daily"))
    catalog = Catalog.build(
        [
            a,
            Pipeline("manual", None, SparkJob("j.py")),
            Pipeline("gate", AssetAndTimeSchedule("@hourly", a), SparkJob("j.py"), within=timedelta(hours=1)),
            Pipeline("parts", CronPartitionTimetable("@daily", key_format="%Y-%m-%d"), SparkJob("j.py")),
            Pipeline("tenants", PartitionedAssetSchedule(a, key="tenant"), SparkJob("j.py")),
        ]
    )
    text = to_mermaid(catalog)
    assert "manual<br/>manual only" in text
    assert "gate<br/>s3://bucket/a<br/>at cron @hourly UTC<br/>within 1:00:00" in text
    assert "parts<br/>cron @daily UTC<br/>partition keys %Y-%m-%d" in text
    assert "tenants<br/>s3://bucket/a<br/>partitioned, identity, by tenant" in text
