"""What `assetflow demo` expects of the example pipelines, and how it judges what the store shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from assetflow.core.catalog import Catalog
from assetflow.loader import load_catalog
from assetflow_dev.demo import DELIVERIES, DemoError, Expectations, Snapshot, judge

EXAMPLES = str(Path(__file__).resolve().parents[2] / "pipelines")


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(EXAMPLES)


def run(pipeline: str, state: str = "success", n: int = 0) -> dict[str, Any]:
    return {"run_id": f"run-{pipeline}-{n}", "pipeline": pipeline, "state": state}


def complete(catalog: Catalog, expected: Expectations) -> Snapshot:
    runs = [run(p) for p in expected.min_runs if p not in expected.exact_runs]
    runs += [run(p, n=i) for p, count in expected.exact_runs.items() for i in range(count)]
    return Snapshot(
        runs=runs,
        assets={uri: {"event_count": 1} for uri in expected.assets},
        aliases={alias: ["s3://x/y"] for alias in expected.aliases},
        quarantined=expected.quarantined,
        elapsed=1.0,
    )


def test_the_examples_expect_every_pipeline_one_etl_run_per_delivery_and_both_aliases(
    catalog: Catalog,
) -> None:
    expected = Expectations.for_catalog(catalog)

    assert set(expected.min_runs) == set(catalog.pipelines)
    assert expected.exact_runs == {"deliveries_etl": DELIVERIES}
    assert set(expected.aliases) == {"partner-exports", "sensor-alerts"}
    assert set(expected.assets) == set(catalog.assets)


def test_without_jobs_nothing_scheduled_on_an_alias_is_expected(catalog: Catalog) -> None:
    expected = Expectations.for_catalog(catalog, jobs_run=False)

    assert "partner_feed_audit" not in expected.min_runs
    assert "s3://assetflow-demo/audit/partner_feeds" not in expected.assets
    assert expected.aliases == ()


def test_a_complete_snapshot_passes_and_each_gap_is_named(catalog: Catalog) -> None:
    expected = Expectations.for_catalog(catalog)
    snapshot = complete(catalog, expected)
    assert judge(snapshot, expected).ok

    snapshot.runs.append(run("deliveries_etl", n=99))
    snapshot.runs.append(run("sensor_check", "failed", n=7))
    snapshot.assets["s3://assetflow-demo/iot/daily"] = {"event_count": 0}
    snapshot.aliases["sensor-alerts"] = []
    snapshot.quarantined = 0
    problems = judge(snapshot, expected).problems

    assert "deliveries_etl: 4 run(s), expected exactly 3" in problems
    assert "run run-sensor_check-7 of sensor_check failed" in problems
    assert "asset s3://assetflow-demo/iot/daily: no event" in problems
    assert "alias sensor-alerts: resolved to no asset" in problems
    assert "0 quarantined message(s), expected 1" in problems


def test_other_definitions_are_refused_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "only.py").write_text(
        "from assetflow import Asset, Pipeline, SparkJob\n"
        "a = Asset('s3://b/a')\n"
        "p = Pipeline(id='p', schedule=a, job=SparkJob('job.py'))\n"
    )
    with pytest.raises(DemoError, match="example watcher 'deliveries'"):
        Expectations.for_catalog(load_catalog(str(tmp_path)))


# ---- a project's own demo.json -------------------------------------------------------------------------


def test_a_project_demo_file_is_read_and_checked_against_the_definitions(
    catalog: Catalog, tmp_path: Path
) -> None:
    from assetflow_dev.demo import ProjectDemo

    path = tmp_path / "demo.json"
    path.write_text(
        '{"messages": [{"watcher": "deliveries", "body": {"delivery_id": "d-1"}}, '
        '{"watcher": "deliveries", "body": "plain text"}], "expect": {"runs": {"deliveries_etl": 2}, "quarantined": 1}}'
    )
    demo = ProjectDemo.load(path, catalog)
    assert demo.messages == (("deliveries", '{"delivery_id": "d-1"}'), ("deliveries", "plain text"))
    expected = demo.expectations(catalog)
    assert expected.min_runs == {"deliveries_etl": 2} and expected.quarantined == 1
    assert set(expected.assets) == {
        "s3://assetflow-demo/landing/deliveries",
        "s3://assetflow-demo/curated/deliveries",
    }

    for bad, message in (
        ("not json", r"demo\.json"),
        ('{"messages": []}', "expected"),
        ('{"messages": [{"watcher": "nope", "body": 1}]}', "one of the watchers"),
        (
            '{"messages": [{"watcher": "deliveries", "body": 1}], "expect": {"runs": {"nope": 1}}}',
            "lack: nope",
        ),
    ):
        path.write_text(bad)
        with pytest.raises(DemoError, match=message):
            ProjectDemo.load(path, catalog)


def test_definitions_without_a_demo_file_or_the_examples_are_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    from assetflow_dev.demo import check_demo
    from assetflow_dev.runtime import RuntimeOptions

    (tmp_path / "cdk.json").write_text("{}")
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "one.py").write_text(
        "from assetflow import Asset, Pipeline, SparkJob\n"
        "a = Asset('s3://b/a')\n"
        "p = Pipeline(id='p', schedule=a, job=SparkJob('jobs/p.py'))\n"
    )
    with pytest.raises(DemoError, match=r"no demo\.json"):
        check_demo(RuntimeOptions(pipelines=str(tmp_path / "pipelines")))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cdk.json", "pipelines"]
