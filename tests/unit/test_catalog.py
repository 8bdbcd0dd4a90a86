"""The catalog: whole-catalog validation, the consumer index and the versioned document (docs/contracts.md)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assetflow import (
    Asset,
    AssetAlias,
    AssetAll,
    AssetAndTimeSchedule,
    AssetAny,
    AssetOrTimeSchedule,
    AssetWatcher,
    Catalog,
    CatalogError,
    CronPartitionTimetable,
    DailyMapper,
    DefinitionError,
    ExpectedArrival,
    KafkaTopic,
    MskCluster,
    PartitionedAssetSchedule,
    Pipeline,
    SelfManagedKafka,
    SparkJob,
    SqsQueue,
    at_least,
    late,
)
from assetflow.core.catalog import Definition, is_kafka
from assetflow.core.errors import DocumentError
from assetflow.loader import load_catalog

PIPELINES = Path(__file__).resolve().parents[2] / "pipelines"
JOB = SparkJob("spark_jobs/job.py")

A = Asset("s3://bucket/a")
B = Asset("s3://bucket/b")
C = Asset("s3://bucket/c")
X = Asset("s3://bucket/x")
Y = Asset("s3://bucket/y")


def errors_of(*definitions: object) -> list[str]:
    with pytest.raises(CatalogError) as info:
        Catalog.build(definitions)
    return info.value.diagnostics


def watched(uri: str, watcher: str, queue: str) -> Asset:
    return Asset(uri, watchers=[AssetWatcher(watcher, SqsQueue(queue))])


# --- the example definitions --------------------------------------------------------------------


@pytest.fixture(scope="module")
def example() -> Catalog:
    return load_catalog(PIPELINES)


def test_example_counts(example: Catalog) -> None:
    assert sorted(example.pipelines) == [
        "daily_report",
        "deliveries_etl",
        "inbox_digest",
        "ops_dashboard",
        "partner_exports",
        "partner_feed_audit",
        "sensor_check",
        "sensor_daily_rollup",
    ]
    assert len(example.assets) == 14
    assert sorted(example.aliases) == ["partner-exports", "sensor-alerts"]
    assert {name: uri for name, (_, uri) in example.watchers.items()} == {
        "deliveries": "s3://assetflow-demo/landing/deliveries",
        "inbox-files": "s3://assetflow-demo-inbox/incoming",
        "sensor-readings": "x-iot://sensors/readings",
        "shop-orders": "x-shop://orders/placed",
        "web-clicks": "x-web://clickstream",
    }
    # One source feeding several assets: the inbox's files are events of the landed files and the audit trail.
    assert example.watcher_assets["inbox-files"] == (
        "s3://assetflow-demo-inbox/incoming",
        "x-audit://inbox/intake",
    )


def test_example_index(example: Catalog) -> None:
    assert example.asset_consumers == {
        "s3://assetflow-demo-inbox/incoming": ("inbox_digest",),
        "s3://assetflow-demo/curated/deliveries": ("ops_dashboard", "partner_exports"),
        "s3://assetflow-demo/iot/readings": ("ops_dashboard",),
        "s3://assetflow-demo/landing/deliveries": ("deliveries_etl",),
        "s3://assetflow-demo/reports/ops_dashboard": ("daily_report",),
        "x-iot://sensors/readings": ("sensor_check", "sensor_daily_rollup"),
        "x-ops://dashboard/refresh": ("ops_dashboard",),
        "x-shop://orders/placed": ("inbox_digest",),
        "x-web://clickstream": ("inbox_digest",),
    }
    assert example.alias_consumers == {"partner-exports": ("partner_feed_audit",)}


def test_example_asset_names_and_extras_are_kept(example: Catalog) -> None:
    raw = example.assets["s3://assetflow-demo/landing/deliveries"]
    assert raw.name == "raw_deliveries"
    assert dict(raw.extra) == {"owner": "supply-chain", "format": "csv"}
    assert example.assets["s3://assetflow-demo/audit/partner_feeds"].name == "partner_feed_audit"


def test_example_warns_only_about_the_manual_refresh_asset(example: Catalog) -> None:
    assert [str(w) for w in example.warnings] == [
        "warning: pipeline 'ops_dashboard': asset 'x-ops://dashboard/refresh' has no watcher and no producing "
        "pipeline; only the API or `assetflow events emit` can update it"
    ]


def test_consumers_direct(example: Catalog) -> None:
    found = example.consumers("s3://assetflow-demo/curated/deliveries")
    assert [(p.id, aliases) for p, aliases in found] == [("ops_dashboard", ()), ("partner_exports", ())]
    assert found[0][0] is example.pipelines["ops_dashboard"]


def test_consumers_through_a_resolved_alias(example: Catalog) -> None:
    found = example.consumers("s3://assetflow-demo/exports/acme", ["partner-exports"])
    assert [(p.id, aliases) for p, aliases in found] == [("partner_feed_audit", ("partner-exports",))]


def test_consumers_of_unknown_assets_and_aliases(example: Catalog) -> None:
    assert example.consumers("s3://nowhere/x") == []
    assert example.consumers("s3://nowhere/x", ["sensor-alerts", "never-declared"]) == []


def test_consumers_merge_direct_and_alias_matches() -> None:
    alias = AssetAlias("al")
    catalog = Catalog.build(
        [
            Pipeline("producer", watched("s3://bucket/in", "w", "q"), JOB, outlets=[alias]),
            Pipeline("both", A | alias, JOB),
            Pipeline("direct", A, JOB),
            Pipeline("other", B & alias, JOB),
        ]
    )
    found = catalog.consumers("s3://bucket/a", ["al", "al"])
    assert [(p.id, aliases) for p, aliases in found] == [
        ("both", ("al",)),
        ("direct", ()),
        ("other", ("al",)),
    ]


def test_consumers_do_not_depend_on_catalog_size() -> None:
    # Given 2,000 pipelines on unrelated assets (built without whole-catalog checks, which are not under test)
    pipelines = {f"p{i:04d}": Pipeline(f"p{i:04d}", Asset(f"s3://bucket/in{i}"), JOB) for i in range(2000)}
    alias = AssetAlias("al")
    pipelines["target"] = Pipeline("target", A & B, JOB)
    pipelines["via_alias"] = Pipeline("via_alias", alias, JOB)
    catalog = Catalog(assets={}, aliases={"al": alias}, pipelines=pipelines)

    # When the consumers of one asset are asked for
    found = catalog.consumers("s3://bucket/a", ["al"])

    # Then only the real consumers come back, found through the index
    assert [p.id for p, _ in found] == ["target", "via_alias"]
    assert catalog.asset_consumers["s3://bucket/a"] == ("target",)
    assert catalog.consumers("s3://bucket/in1999") == [(pipelines["p1999"], ())]


def test_is_kafka(example: Catalog) -> None:
    assert is_kafka(example.watchers["sensor-readings"][0]) is True
    assert is_kafka(example.watchers["deliveries"][0]) is False


# --- errors -------------------------------------------------------------------------------------


def test_duplicate_pipeline_ids_name_both_origins() -> None:
    errors = errors_of(
        Definition(Pipeline("p", A, JOB), "one.py"), Definition(Pipeline("p", B, JOB), "two.py")
    )
    assert errors == ["error: pipeline 'p': declared twice (one.py and two.py); pipeline ids must be unique"]


def test_the_same_pipeline_object_seen_twice_is_fine() -> None:
    pipeline = Pipeline("p", watched("s3://bucket/a", "w", "q"), JOB)
    assert list(Catalog.build([pipeline, pipeline]).pipelines) == ["p"]


def test_asset_declared_with_two_names() -> None:
    errors = errors_of(Asset("one", "s3://bucket/a"), Definition(Asset("two", "s3://bucket/a"), "f.py"))
    assert errors == ["error: asset 's3://bucket/a': declared with two names, 'one' and 'two' (f.py)"]


def test_a_name_given_once_is_kept_wherever_declared() -> None:
    catalog = Catalog.build([Pipeline("p", A, JOB), Asset("alpha", "s3://bucket/a"), Asset("s3://bucket/a")])
    assert catalog.assets["s3://bucket/a"].name == "alpha"


def test_different_extras_keep_the_first_with_a_warning() -> None:
    catalog = Catalog.build([Asset("s3://bucket/a", extra={"v": 1}), Asset("s3://bucket/a", extra={"v": 2})])
    assert dict(catalog.assets["s3://bucket/a"].extra) == {"v": 1}
    assert [str(w) for w in catalog.warnings] == [
        "warning: asset 's3://bucket/a': declared with different extras; the first is kept (<definitions>)"
    ]


def test_extra_declared_once_is_kept() -> None:
    catalog = Catalog.build([Asset("s3://bucket/a"), Asset("s3://bucket/a", extra={"v": 2})])
    assert dict(catalog.assets["s3://bucket/a"].extra) == {"v": 2}
    assert catalog.warnings == ()


def test_two_watchers_on_the_same_queue() -> None:
    errors = errors_of(watched("s3://bucket/x", "w1", "orders"), watched("s3://bucket/y", "w2", "orders"))
    assert len(errors) == 1
    assert errors[0].startswith("error: watcher 'w2': watches the same sqs source as watcher 'w1'")


def test_queues_of_the_same_name_in_other_accounts_are_different_sources() -> None:
    x = Asset(
        "s3://bucket/x",
        watchers=[AssetWatcher("w1", SqsQueue(arn="arn:aws:sqs:us-east-1:111111111111:orders"))],
    )
    y = Asset(
        "s3://bucket/y",
        watchers=[AssetWatcher("w2", SqsQueue(arn="arn:aws:sqs:eu-west-1:222222222222:orders"))],
    )
    assert len(Catalog.build([x, y]).watchers) == 2


def test_same_kafka_topic_on_the_same_cluster() -> None:
    x = Asset("s3://bucket/x", watchers=[AssetWatcher("w1", KafkaTopic("t", consumer_group_id="g"))])
    y = Asset("s3://bucket/y", watchers=[AssetWatcher("w2", KafkaTopic("t", consumer_group_id="g"))])
    assert "watches the same kafka source as watcher 'w1'" in errors_of(x, y)[0]


def test_same_kafka_topic_on_different_clusters_is_fine() -> None:
    msk = MskCluster("arn:aws:kafka:eu-west-1:123456789012:cluster/events/abc-1")
    x = Asset("s3://bucket/x", watchers=[AssetWatcher("w1", KafkaTopic("t"))])
    y = Asset("s3://bucket/y", watchers=[AssetWatcher("w2", KafkaTopic("t", cluster=msk))])
    z = Asset(
        "s3://bucket/z", watchers=[AssetWatcher("w3", KafkaTopic("t", cluster=SelfManagedKafka(("b:9092",))))]
    )
    assert sorted(Catalog.build([x, y, z]).watchers) == ["w1", "w2", "w3"]


def test_duplicate_watcher_names_on_different_assets() -> None:
    errors = errors_of(watched("s3://bucket/x", "w", "q1"), watched("s3://bucket/y", "w", "q2"))
    assert errors == ["error: watcher 'w': name used twice (assets 's3://bucket/x' and 's3://bucket/y')"]


def test_duplicate_watcher_names_in_one_declaration() -> None:
    asset = Asset(
        "s3://bucket/x", watchers=[AssetWatcher("w", SqsQueue("q1")), AssetWatcher("w", SqsQueue("q2"))]
    )
    assert errors_of(asset) == [
        "error: watcher 'w': name used twice (assets 's3://bucket/x' and 's3://bucket/x')"
    ]


def test_duplicate_watcher_names_across_declarations_of_one_asset() -> None:
    errors_of(watched("s3://bucket/x", "w", "q1"), watched("s3://bucket/x", "w", "q2"))


def test_one_watcher_feeds_every_asset_it_is_attached_to() -> None:
    # As several Airflow assets share one watcher's trigger: one source, one event per asset for each message.
    watcher = AssetWatcher("w", SqsQueue("q"))
    catalog = Catalog.build(
        [Asset("s3://bucket/y", watchers=[watcher]), Asset("s3://bucket/x", watchers=[watcher])]
    )
    assert catalog.watcher_assets == {"w": ("s3://bucket/x", "s3://bucket/y")}
    assert catalog.watchers["w"] == (watcher, "s3://bucket/x")
    document = catalog.to_document()
    assert document["watchers"]["w"]["assets"] == ["s3://bucket/x", "s3://bucket/y"]
    again = Catalog.from_document(document)
    assert again.watcher_assets == catalog.watcher_assets and again.to_document() == document
    # Two different watchers on one source would split its messages: still refused, with the fix.
    errors = errors_of(
        Asset("s3://bucket/x", watchers=[AssetWatcher("w1", SqsQueue("q"))]),
        Asset("s3://bucket/y", watchers=[AssetWatcher("w2", SqsQueue("q"))]),
    )
    assert any("attach the same AssetWatcher object" in e for e in errors)


def test_the_same_watcher_declared_twice_on_one_asset_is_fine() -> None:
    catalog = Catalog.build([watched("s3://bucket/x", "w", "q"), watched("s3://bucket/x", "w", "q")])
    assert list(catalog.watchers) == ["w"]
    assert len(catalog.assets["s3://bucket/x"].watchers) == 1


@pytest.mark.parametrize("where", ["schedule", "inlets"])
def test_alias_used_but_never_produced(where: str) -> None:
    alias = AssetAlias("ghost")
    pipeline = Pipeline("p", alias, JOB) if where == "schedule" else Pipeline("p", A, JOB, inlets=[alias])
    errors = [e for e in errors_of(pipeline) if "ghost" in e]
    assert errors == [
        "error: pipeline 'p': uses alias 'ghost', which no pipeline declares in outlets=[AssetAlias(...)], so it "
        "can never resolve"
    ]


def test_every_error_is_listed_at_once() -> None:
    # Given five independent mistakes
    definitions = [
        Definition(Pipeline("dup", A, JOB), "a.py"),
        Definition(Pipeline("dup", B, JOB), "b.py"),
        Asset("one", "s3://bucket/n"),
        Asset("two", "s3://bucket/n"),
        watched("s3://bucket/w1", "w", "q1"),
        watched("s3://bucket/w2", "w", "q2"),
        Pipeline("aliased", AssetAlias("ghost"), JOB),
        Pipeline("looping", C | Y, JOB, outlets=[Y]),
    ]

    # When the catalog is built
    with pytest.raises(CatalogError) as info:
        Catalog.build(definitions)

    # Then each one is reported, in the exception's message too
    diagnostics = info.value.diagnostics
    assert len(diagnostics) == 5
    for fragment in (
        "'dup': declared twice",
        "two names",
        "watcher 'w': name used twice",
        "alias 'ghost'",
        "looping",
    ):
        assert sum(fragment in d for d in diagnostics) == 1, fragment
        assert fragment in str(info.value)
    assert str(info.value).startswith("invalid catalog:\n  - error: ")


# --- loops --------------------------------------------------------------------------------------


def loop_errors(errors: list[str]) -> list[str]:
    return [e for e in errors if "endless loop" in e]


def test_self_loop_through_an_or() -> None:
    assert loop_errors(errors_of(Pipeline("p", A | B, JOB, outlets=[B]))) == [
        "error: pipelines p: their outlets satisfy their own schedules with no other input: an endless loop. Give "
        "each schedule an input from outside the loop (an & with another asset) or remove the outlet"
    ]


def test_two_pipeline_loop() -> None:
    errors = loop_errors(errors_of(Pipeline("p", X, JOB, outlets=[Y]), Pipeline("q", Y, JOB, outlets=[X])))
    assert len(errors) == 1
    assert errors[0].startswith("error: pipelines p, q: ")


def test_a_loop_needing_an_outside_input_is_not_a_loop() -> None:
    catalog = Catalog.build([watched("s3://bucket/a", "w", "q"), Pipeline("p", A & B, JOB, outlets=[B])])
    assert list(catalog.pipelines) == ["p"]
    assert not [w for w in catalog.warnings if "endlessly" in str(w)]


def test_partitioned_producers_do_not_trigger_a_non_partition_aware_consumer() -> None:
    # p's partitioned runs produce y (which does not trigger q); q's runs produce x (no partition key: not p's)
    catalog = Catalog.build(
        [
            Pipeline("p", PartitionedAssetSchedule(X, DailyMapper()), JOB, outlets=[Y]),
            Pipeline("q", Y, JOB, outlets=[X]),
        ]
    )
    assert sorted(catalog.pipelines) == ["p", "q"]
    assert not [w for w in catalog.warnings if "endlessly" in str(w)]


def test_a_loop_of_partitioned_pipelines_is_a_loop() -> None:
    errors = errors_of(
        Pipeline("p", PartitionedAssetSchedule(X), JOB, outlets=[Y]),
        Pipeline("q", PartitionedAssetSchedule(Y), JOB, outlets=[X]),
    )
    assert loop_errors(errors)[0].startswith("error: pipelines p, q: ")


def test_a_partition_aware_consumer_of_a_plain_loop_is_not_in_it() -> None:
    errors = errors_of(
        Pipeline("p", A | B, JOB, outlets=[B]),
        Pipeline("q", PartitionedAssetSchedule(B), JOB, outlets=[C]),
    )
    assert loop_errors(errors)[0].startswith("error: pipelines p: ")


def test_alias_loop_is_only_a_warning() -> None:
    alias = AssetAlias("round")
    catalog = Catalog.build([Pipeline("p", alias, JOB, outlets=[alias])])
    assert [str(w) for w in catalog.warnings] == [
        "warning: pipelines p: may trigger each other endlessly through the aliases they add to at run time"
    ]


# --- producer warnings --------------------------------------------------------------------------


def test_assets_without_producer_or_watcher_get_a_warning_each() -> None:
    catalog = Catalog.build(
        [
            watched("s3://bucket/w", "w", "q"),
            Pipeline("p", Asset("s3://bucket/w") & A, JOB, outlets=[B]),
            Pipeline("q", B | C | C, JOB),
        ]
    )
    assert sorted(str(w) for w in catalog.warnings) == [
        "warning: pipeline 'p': asset 's3://bucket/a' has no watcher and no producing pipeline; only the API or "
        "`assetflow events emit` can update it",
        "warning: pipeline 'q': asset 's3://bucket/c' has no watcher and no producing pipeline; only the API or "
        "`assetflow events emit` can update it",
    ]


def test_assets_of_outlets_and_inlets_are_in_the_catalog() -> None:
    catalog = Catalog.build([Pipeline("p", watched("s3://bucket/a", "w", "q"), JOB, outlets=[B], inlets=[C])])
    assert sorted(catalog.assets) == ["s3://bucket/a", "s3://bucket/b", "s3://bucket/c"]
    assert "s3://bucket/c" not in catalog.asset_consumers


# --- the document -------------------------------------------------------------------------------


def test_example_document_shape(example: Catalog) -> None:
    doc = example.to_document()
    assert list(doc) == ["format", "version", "assets", "aliases", "watchers", "pipelines", "index"]
    assert (doc["format"], doc["version"]) == ("assetflow.catalog", 2)
    assert doc["aliases"] == {
        "partner-exports": {"name": "partner-exports", "group": "asset"},
        "sensor-alerts": {"name": "sensor-alerts", "group": "asset"},
    }
    assert doc["watchers"]["deliveries"]["asset"] == "s3://assetflow-demo/landing/deliveries"
    assert doc["watchers"]["deliveries"]["source"]["queue"] == "deliveries"
    assert doc["assets"]["x-ops://dashboard/refresh"] == {
        "uri": "x-ops://dashboard/refresh",
        "name": "dashboard_refresh",
        "group": "asset",
        "extra": {},
        "expect": None,
    }
    assert doc["index"]["aliases"] == {"partner-exports": ["partner_feed_audit"]}
    assert doc["pipelines"]["sensor_daily_rollup"]["partitioned"] is True


def test_example_document_round_trip(example: Catalog) -> None:
    doc = example.to_document()
    assert Catalog.from_document(doc).to_document() == doc
    as_json = json.loads(json.dumps(doc))
    rebuilt = Catalog.from_document(as_json)
    assert rebuilt.to_document() == as_json
    assert [(p.id, a) for p, a in rebuilt.consumers("x-iot://sensors/readings")] == [
        ("sensor_check", ()),
        ("sensor_daily_rollup", ()),
    ]
    assert rebuilt.pipelines == example.pipelines


@pytest.mark.parametrize("fmt", ["assetflow.catalog.v2", None, "airflow.catalog"])
def test_from_document_refuses_a_wrong_format(example: Catalog, fmt: Any) -> None:
    doc = {**example.to_document(), "format": fmt}
    with pytest.raises(DocumentError, match="not an assetflow catalog document"):
        Catalog.from_document(doc)
    with pytest.raises(DocumentError, match="not an assetflow catalog document"):
        Catalog.from_document([doc])  # type: ignore[arg-type]


@pytest.mark.parametrize("version", [0, 1, 3, "2", None])
def test_from_document_refuses_another_version_and_says_to_recompile(example: Catalog, version: Any) -> None:
    doc = {**example.to_document(), "version": version}
    with pytest.raises(
        DocumentError, match=r"is not supported .* recompile it with `assetflow catalog --json`"
    ):
        Catalog.from_document(doc)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda d: d["index"]["assets"]["s3://assetflow-demo/iot/readings"].append("sensor_check"),
        lambda d: d["index"]["assets"].pop("x-ops://dashboard/refresh"),
        lambda d: d["index"]["aliases"].update({"sensor-alerts": ["daily_report"]}),
        lambda d: d["watchers"]["deliveries"].update({"asset": "s3://assetflow-demo/nowhere"}),
        lambda d: d["pipelines"]["daily_report"].update({"partitioned": True}),
    ],
)
def test_from_document_refuses_a_tampered_document(example: Catalog, tamper: Any) -> None:
    doc = json.loads(json.dumps(example.to_document()))
    tamper(doc)
    with pytest.raises(DocumentError, match="does not match its own content"):
        Catalog.from_document(doc)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda d: d.pop("watchers"),
        lambda d: d["pipelines"]["daily_report"].pop("job"),
        lambda d: d["watchers"]["deliveries"]["source"].update({"batch_size": 0}),
        lambda d: d["assets"]["x-ops://dashboard/refresh"].update({"uri": "airflow://x"}),
        lambda d: d.update({"aliases": None}),
    ],
)
def test_from_document_refuses_malformed_content(example: Catalog, tamper: Any) -> None:
    doc = json.loads(json.dumps(example.to_document()))
    tamper(doc)
    with pytest.raises(DocumentError):
        Catalog.from_document(doc)


# --- random small catalogs ----------------------------------------------------------------------

SOURCES = [f"s3://src/s{i}" for i in range(4)]
OUTPUTS = [f"s3://out/o{i}" for i in range(4)]
ALIASES = ["al0", "al1"]


def conditions() -> st.SearchStrategy[Any]:
    selectors = st.one_of(st.sampled_from(SOURCES).map(Asset), st.sampled_from(ALIASES).map(AssetAlias))
    leaves = st.one_of(
        selectors,
        selectors.map(lambda s: s.where({"kind": [{"prefix": "a"}]})),
        st.just(Asset(OUTPUTS[0]).failed()),
        st.just(late(Asset(SOURCES[0]))),
    )
    streams = st.one_of(
        leaves,
        st.builds(at_least, selectors, st.integers(1, 3)),
        st.builds(lambda a, b: a.then(b, within=timedelta(minutes=5)), selectors, selectors),
    )
    return st.recursive(
        streams,
        lambda kids: st.builds(
            lambda all_of, items: AssetAll(*items) if all_of else AssetAny(*items),
            st.booleans(),
            st.lists(kids, min_size=1, max_size=3),
        ),
        max_leaves=6,
    )


@st.composite
def small_catalogs(draw: st.DrawFn) -> Catalog:
    definitions: list[object] = []
    for i, uri in enumerate(SOURCES):
        watchers = []
        if draw(st.booleans()):
            source = (
                SqsQueue(f"q{i}") if draw(st.booleans()) else KafkaTopic(f"t{i}", partition_key_field="day")
            )
            watchers.append(AssetWatcher(f"w{i}", source))
        name = draw(st.sampled_from([None, f"source {i}"]))
        extra = draw(st.sampled_from([None, {"i": i, "tags": ["x"]}]))
        group = draw(st.sampled_from(["asset", "landing"]))
        expect = ExpectedArrival("0 6 * * *", grace=timedelta(hours=1)) if i == 0 else None
        definitions.append(Asset(name, uri, group=group, extra=extra, watchers=watchers, expect=expect))
    # the aliases and the first output are produced by one pipeline on a source, so every catalog drawn is valid
    definitions.append(
        Pipeline(
            "producer",
            Asset(SOURCES[0]),
            JOB,
            outlets=[*(AssetAlias(a, group="exports") for a in ALIASES), Asset(OUTPUTS[0])],
        )
    )
    for n in range(draw(st.integers(0, 4))):
        condition = draw(conditions())
        kind = draw(
            st.sampled_from(
                ["assets", "or_time", "and_time", "partitioned", "keyed", "time", "manual", "cron"]
            )
        )
        schedule: Any = condition
        cron = draw(st.sampled_from(["0 6 * * *", "*/10 * * * 1-5", timedelta(hours=1)]))
        if kind == "or_time":
            schedule = AssetOrTimeSchedule(cron, condition)
        elif kind == "and_time":
            schedule = AssetAndTimeSchedule(cron, condition, timezone="Europe/Berlin")
        elif kind == "partitioned":
            schedule = PartitionedAssetSchedule(condition, DailyMapper())
        elif kind == "keyed":
            schedule = PartitionedAssetSchedule(condition, key="payload.tenant")
        elif kind == "time":
            schedule = cron
        elif kind == "manual":
            schedule = None
        elif kind == "cron":
            schedule = CronPartitionTimetable(cron, key_format="%Y-%m-%d")
        timed_only = kind in ("time", "manual", "cron")
        batch = (
            draw(st.booleans())
            if condition.is_any_of_leaves() and kind in ("assets", "or_time", "partitioned")
            else True
        )
        windows: dict[str, Any] = {}
        if batch and not timed_only and draw(st.booleans()):
            windows["within"] = timedelta(minutes=10)
            if kind != "and_time":
                windows["debounce"] = timedelta(seconds=30)
                windows["max_wait"] = draw(st.sampled_from([None, timedelta(minutes=5)]))
        definitions.append(
            Pipeline(
                f"p{n}",
                schedule,
                SparkJob(
                    f"jobs/p{n}.py",
                    tuple(draw(st.lists(st.sampled_from(["--a", "1"]), max_size=2))),
                    {"k": "v"},
                ),
                outlets=[Asset(u) for u in draw(st.lists(st.sampled_from(OUTPUTS), max_size=2))],
                inlets=draw(
                    st.lists(st.sampled_from([Asset(OUTPUTS[0]), AssetAlias(ALIASES[1])]), max_size=2)
                ),
                max_active_runs=draw(st.sampled_from([None, 1, 3])),
                batch=batch,
                skip_unchanged=not timed_only and draw(st.booleans()),
                **windows,
            )
        )
    return Catalog.build(definitions)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=small_catalogs())
def test_random_catalog_documents_round_trip(catalog: Catalog) -> None:
    doc = catalog.to_document()
    as_json = json.loads(json.dumps(doc))
    rebuilt = Catalog.from_document(as_json)

    assert rebuilt.to_document() == doc
    assert rebuilt.pipelines == catalog.pipelines
    assert rebuilt.asset_consumers == catalog.asset_consumers
    for uri in SOURCES:
        expected = {
            p.id for p in catalog.pipelines.values() if uri in {a.uri for a in p.condition.iter_assets()}
        }
        assert {p.id for p, _ in rebuilt.consumers(uri)} == expected


# --- references, groups, expectations and the event operators -------------------------------------------


def test_asset_refs_resolve_by_name_and_uri() -> None:
    orders = Asset("orders", "s3://bucket/orders")
    by_name = Pipeline("by_name", Asset.ref(name="orders") & B, JOB)
    by_uri = Pipeline("by_uri", at_least(Asset.ref(uri="S3://bucket/orders/"), 2), JOB)
    where = Pipeline(
        "where", Asset.ref(name="orders").where({"kind": ["x"]}) | Asset.ref(name="orders").failed(), JOB
    )
    producer = Pipeline("producer", B, JOB, outlets=[orders])
    catalog = Catalog.build([orders, by_name, by_uri, where, producer])
    assert catalog.pipelines["by_name"].condition == orders & B
    assert catalog.pipelines["by_uri"].condition == at_least(orders, 2)
    assert catalog.pipelines["where"].condition == orders.where({"kind": ["x"]}) | orders.failed()
    assert [p.id for p, _ in catalog.consumers(orders.uri)] == ["by_name", "by_uri", "where"]


def test_an_unknown_ref_is_a_clear_catalog_error() -> None:
    errors = errors_of(
        Pipeline("p", Asset.ref(name="nope") | A, JOB), Pipeline("q", Asset.ref(uri="s3://bucket/zz"), JOB)
    )
    assert any("pipeline 'p'" in e and "Asset.ref(name='nope') names no declared asset" in e for e in errors)
    assert any("pipeline 'q'" in e and "Asset.ref(uri='s3://bucket/zz')" in e for e in errors)


def test_refs_are_for_schedules_not_outlets() -> None:
    with pytest.raises(DefinitionError, match=r"Asset\.ref\(\.\.\.\) is for schedules"):
        Pipeline("p", A, JOB, outlets=[Asset.ref(name="x")])  # type: ignore[list-item]


def test_asset_names_are_unique() -> None:
    errors = errors_of(Asset("orders", "s3://bucket/a"), Asset("orders", "s3://bucket/b"))
    assert any("asset name 'orders'" in e and "names two assets" in e for e in errors)


def test_groups_and_expectations_merge_and_conflict() -> None:
    daily = ExpectedArrival("0 6 * * *", grace=timedelta(hours=1))
    catalog = Catalog.build(
        [
            Asset("s3://bucket/a", group="landing"),
            Pipeline("p", A, JOB),
            Asset(uri="s3://bucket/a", expect=daily),
        ]
    )
    assert (catalog.assets[A.uri].group, catalog.assets[A.uri].expect) == ("landing", daily)
    errors = errors_of(
        Asset("s3://bucket/a", group="landing"),
        Asset("s3://bucket/a", group="curated"),
        Asset("s3://bucket/a", expect=daily),
        Asset("s3://bucket/a", expect=ExpectedArrival("@hourly")),
    )
    assert any("declared in two groups" in e for e in errors)
    assert any("declared with two different expect=" in e for e in errors)


def test_late_needs_an_expectation_and_failed_needs_a_producer() -> None:
    errors = errors_of(Pipeline("fallback", late(A), JOB), Pipeline("alert", B.failed(), JOB))
    assert any("late('s3://bucket/a') needs an expectation" in e for e in errors)
    assert any(
        "'s3://bucket/b'.failed() can never hold: no pipeline has the asset in its outlets" in e
        for e in errors
    )
    catalog = Catalog.build(
        [
            Asset("s3://bucket/a", expect=ExpectedArrival("@daily")),
            Pipeline("fallback", late(A), JOB),
            Pipeline("producer", C, JOB, outlets=[B]),
            Pipeline("alert", B.failed(), JOB),
        ]
    )
    assert [p.id for p, _ in catalog.consumers(B.uri)] == ["alert"]


def test_loops_through_the_operators() -> None:
    # at_least of its own outlet: certain (each run makes one more event)
    assert loop_errors(errors_of(Pipeline("p", at_least(A, 3), JOB, outlets=[A])))
    # where and then depend on content and order: a possible loop, a warning
    possible = Catalog.build([Pipeline("p", A.where({"k": ["v"]}) | A.then(A), JOB, outlets=[A])])
    assert any("may trigger each other" in str(w) for w in possible.warnings)
    # a failure of its own run: possible; a fallback on lateness producing the asset: no loop
    failing = Catalog.build([Pipeline("p", A.failed(), JOB, outlets=[A])])
    assert any("may trigger each other" in str(w) for w in failing.warnings)
    fallback = Catalog.build(
        [Asset("s3://bucket/a", expect=ExpectedArrival("@daily")), Pipeline("p", late(A), JOB, outlets=[A])]
    )
    assert not any("trigger each other" in str(w) for w in fallback.warnings)


def test_alias_checks_see_through_the_operators() -> None:
    errors = errors_of(Pipeline("p", at_least(AssetAlias("ghost").where({"k": ["v"]}), 2), JOB))
    assert any("uses alias 'ghost'" in e for e in errors)


def test_a_document_with_every_new_shape_round_trips() -> None:
    daily = ExpectedArrival("0 6 * * *", grace=timedelta(hours=1), key_format="%Y-%m-%d")
    definitions = [
        Asset("landing", "s3://bucket/a", group="raw", expect=daily),
        Pipeline("producer", B, JOB, outlets=[C, AssetAlias("out", group="exports")]),
        Pipeline("manual", None, JOB),
        Pipeline("hourly", timedelta(hours=1), JOB),
        Pipeline("gate", AssetAndTimeSchedule("@hourly", A & B), JOB, within=timedelta(hours=2)),
        Pipeline("parts", CronPartitionTimetable("@daily", key_format="%Y-%m-%d"), JOB),
        Pipeline("tenants", PartitionedAssetSchedule(A & B, key="tenant"), JOB, skip_unchanged=True),
        Pipeline(
            "ops",
            (at_least(A, 3) & B.where({"n": [{"numeric": [">", 5]}]}))
            | A.then(B, within=timedelta(minutes=5))
            | C.failed()
            | late(A),
            JOB,
            debounce=timedelta(seconds=30),
            max_wait=timedelta(minutes=5),
        ),
    ]
    catalog = Catalog.build(definitions)
    doc = json.loads(json.dumps(catalog.to_document()))
    rebuilt = Catalog.from_document(doc)
    assert rebuilt.to_document() == doc
    assert rebuilt.pipelines == catalog.pipelines
    assert rebuilt.assets[A.uri].expect == daily and rebuilt.assets[A.uri].group == "raw"
    assert rebuilt.aliases["out"].group == "exports"
    assert doc["pipelines"]["ops"]["debounce_seconds"] == 30.0
    assert doc["pipelines"]["parts"]["partitioned"] is True


# ---- loop detection: linear, and the same answers as the plain fixpoint ------------------------------------


def _fixpoint(pipelines: dict[str, Pipeline], with_aliases: bool) -> set[str]:
    """The definition of a self-sustaining set, computed the slow, obvious way (round after round)."""
    alive = set(pipelines)
    while True:
        dropped = set()
        for pid in alive:
            pipeline = pipelines[pid]
            feeders = [pipelines[q] for q in alive if pipelines[q].partitioned == pipeline.partitioned]
            assets = {o.uri for q in feeders for o in q.outlets if isinstance(o, Asset)}
            aliases = (
                {o.name for q in feeders for o in q.outlets if isinstance(o, AssetAlias)}
                if with_aliases
                else set()
            )
            if not pipeline.condition.feeds(frozenset(assets), frozenset(aliases), sure=not with_aliases):
                dropped.add(pid)
        if not dropped:
            return alive
        alive -= dropped


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shapes=st.lists(
        st.tuples(
            st.lists(st.integers(0, 7), min_size=1, max_size=3),  # the assets a pipeline's schedule names
            st.booleans(),  # all of them (&) or any (|)
            st.lists(st.integers(0, 7), max_size=2),  # the assets it produces
            st.booleans(),  # whether it adds to alias "al" too
            st.booleans(),  # partition-aware
        ),
        min_size=1,
        max_size=12,
    ),
    with_aliases=st.booleans(),
)
def test_loop_detection_matches_the_plain_fixpoint(shapes: list[Any], with_aliases: bool) -> None:
    assets = [Asset(f"x-loop://a{n}") for n in range(8)]
    alias = AssetAlias("al")
    pipelines: dict[str, Pipeline] = {}
    for n, (names, all_of, produced, adds_alias, partitioned) in enumerate(shapes):
        leaves = [assets[i] for i in dict.fromkeys(names)] + ([alias] if n % 3 == 0 else [])
        condition = (AssetAll if all_of else AssetAny)(*leaves) if len(leaves) > 1 else leaves[0]
        schedule = PartitionedAssetSchedule(condition, DailyMapper()) if partitioned else condition
        outlets = [assets[i] for i in dict.fromkeys(produced)] + ([alias] if adds_alias else [])
        pipelines[f"p{n}"] = Pipeline(
            f"p{n}", schedule=schedule, job=SparkJob("spark_jobs/job.py"), outlets=outlets
        )
    assert Catalog._self_sustaining(pipelines, with_aliases) == _fixpoint(pipelines, with_aliases)
