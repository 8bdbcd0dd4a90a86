"""Pipelines, their Spark jobs, and the Metadata a job attaches to its outlets (DESIGN §1, §3.5)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from assetflow import (
    Asset,
    AssetAlias,
    AssetAndTimeSchedule,
    AssetOrTimeSchedule,
    DailyMapper,
    DefinitionError,
    Metadata,
    PartitionedAssetSchedule,
    Pipeline,
    SparkJob,
)
from assetflow.core.errors import DocumentError
from assetflow.core.schedules import AssetSchedule

A = Asset("s3://bucket/a")
B = Asset("s3://bucket/b")
C = Asset("s3://bucket/c")
L = AssetAlias("exports")
JOB = SparkJob("spark_jobs/etl.py")


# --- ids --------------------------------------------------------------------------------------


@pytest.mark.parametrize("pid", ["p", "deliveries_etl", "Daily-Report-2", "x" * 64])
def test_pipeline_ids_accepted(pid: str) -> None:
    assert Pipeline(pid, A, JOB).id == pid


@pytest.mark.parametrize(
    "pid", ["", "1st", "_private", "-dash", "has space", "dots.no", "x" * 65, "pïpe", None, 7]
)
def test_pipeline_ids_refused(pid: Any) -> None:
    with pytest.raises(
        DefinitionError, match="1-64 characters of letters, digits, '_' or '-', starting with a letter"
    ):
        Pipeline(pid, A, JOB)


# --- SparkJob ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "entry_point",
    ["etl.py", "spark_jobs/etl.py", "./spark_jobs/etl.py", "a-b/c_d/e.f.py", "s3://bucket/jobs/etl.py"],
)
def test_entry_points_accepted(entry_point: str) -> None:
    assert SparkJob(entry_point).entry_point == entry_point


@pytest.mark.parametrize(
    "entry_point",
    ["etl", "etl.pyc", "spark_jobs/etl.sh", "spark jobs/etl.py", "s3://bucket/my job.py", "", None],
)
def test_entry_point_must_be_a_py_path(entry_point: Any) -> None:
    with pytest.raises(DefinitionError, match=r"must be a \.py path such as 'spark_jobs/etl\.py'"):
        SparkJob(entry_point)


@pytest.mark.parametrize(
    "entry_point", ["/opt/jobs/etl.py", "../etl.py", "spark_jobs/../../etl.py", "s3://b/../x.py"]
)
def test_entry_point_must_stay_in_the_project(entry_point: str) -> None:
    with pytest.raises(DefinitionError, match="must be relative to the project"):
        SparkJob(entry_point)


def test_arguments_are_a_tuple_of_strings() -> None:
    job = SparkJob("etl.py", arguments=["--day", "2026-11-21"])  # type: ignore[arg-type]
    assert job.arguments == ("--day", "2026-11-21")
    assert SparkJob("etl.py", arguments="--verbose").arguments == ("--verbose",)  # type: ignore[arg-type]


@pytest.mark.parametrize("arguments", [["--max", 30], [None], [b"--x"]])
def test_arguments_must_be_strings(arguments: list[Any]) -> None:
    with pytest.raises(DefinitionError, match="arguments must be strings"):
        SparkJob("etl.py", arguments=arguments)  # type: ignore[arg-type]


def test_context_argument_is_reserved() -> None:
    with pytest.raises(DefinitionError, match="--assetflow-context is added by assetflow"):
        SparkJob("etl.py", arguments=("--day", "1", "--assetflow-context", "s3://b/k"))


def test_context_argument_with_equals_is_reserved() -> None:
    with pytest.raises(DefinitionError, match="--assetflow-context"):
        SparkJob("etl.py", arguments=("--assetflow-context=s3://b/k",))


def test_spark_conf_is_frozen_strings() -> None:
    conf = {"spark.sql.shuffle.partitions": "4"}
    job = SparkJob("etl.py", spark_conf=conf)
    conf["spark.executor.memory"] = "4g"
    assert dict(job.spark_conf) == {"spark.sql.shuffle.partitions": "4"}
    with pytest.raises(TypeError):
        job.spark_conf["x"] = "y"  # type: ignore[index]
    with pytest.raises(DefinitionError, match="spark_conf keys and values must be strings"):
        SparkJob("etl.py", spark_conf={"spark.sql.shuffle.partitions": 4})  # type: ignore[dict-item]


def test_spark_jobs_compare_and_hash_by_value() -> None:
    one = SparkJob("etl.py", ("--a",), {"x": "1", "y": "2"})
    two = SparkJob("etl.py", ["--a"], {"y": "2", "x": "1"})  # type: ignore[arg-type]
    assert one == two
    assert hash(one) == hash(two)
    assert one != SparkJob("etl.py", ("--b",), {"x": "1", "y": "2"})


def test_spark_job_document_sorts_the_conf() -> None:
    assert SparkJob("etl.py", ("--a",), {"z": "1", "a": "2"}).to_json() == {
        "entry_point": "etl.py",
        "arguments": ["--a"],
        "spark_conf": {"a": "2", "z": "1"},
    }
    assert list(SparkJob("etl.py", spark_conf={"z": "1", "a": "2"}).to_json()["spark_conf"]) == ["a", "z"]


# --- schedule and batch -------------------------------------------------------------------------


def test_schedule_forms() -> None:
    assert Pipeline("p", A, JOB).schedule == AssetSchedule(A)
    assert Pipeline("p", [A, B], JOB).condition == A & B
    assert Pipeline("p", (A | B), JOB).condition == A | B
    timed = AssetOrTimeSchedule("0 6 * * *", A)
    assert Pipeline("p", timed, JOB).schedule is timed


def test_schedule_errors_name_the_pipeline() -> None:
    with pytest.raises(DefinitionError, match="pipeline 'p' schedule: an empty list"):
        Pipeline("p", [], JOB)
    with pytest.raises(
        DefinitionError, match="pipeline 'p' schedule: 's3://bucket/a' looks like an asset URI"
    ):
        Pipeline("p", "s3://bucket/a", JOB)
    with pytest.raises(DefinitionError, match="pipeline 'p' schedule: expected an Asset"):
        Pipeline("p", 5, JOB)  # type: ignore[arg-type]


@pytest.mark.parametrize("schedule", [A, A | B, L, A | L, [A], AssetOrTimeSchedule("0 6 * * *", A | B)])
def test_batch_false_accepted_when_any_single_event_satisfies(schedule: Any) -> None:
    assert Pipeline("p", schedule, JOB, batch=False).batch is False


@pytest.mark.parametrize("schedule", [A & B, [A, B], (A & B) | C, A & L, PartitionedAssetSchedule([A, B])])
def test_batch_false_refused_when_several_events_are_needed(schedule: Any) -> None:
    with pytest.raises(DefinitionError, match="batch=False makes one run per event"):
        Pipeline("p", schedule, JOB, batch=False)


def test_batch_must_be_a_bool() -> None:
    with pytest.raises(DefinitionError, match="batch must be True or False"):
        Pipeline("p", A, JOB, batch=0)  # type: ignore[arg-type]


def test_partitioned_property_follows_the_schedule() -> None:
    assert Pipeline("p", PartitionedAssetSchedule(A, DailyMapper()), JOB).partitioned is True
    assert Pipeline("p", A, JOB).partitioned is False


# --- max_active_runs, job, outlets and inlets ---------------------------------------------------


@pytest.mark.parametrize("value", [None, 1, 25])
def test_max_active_runs_accepted(value: int | None) -> None:
    assert Pipeline("p", A, JOB, max_active_runs=value).max_active_runs == value


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "2"])
def test_max_active_runs_refused(value: Any) -> None:
    with pytest.raises(DefinitionError, match="max_active_runs must be a positive integer or None"):
        Pipeline("p", A, JOB, max_active_runs=value)


def test_job_must_be_a_spark_job() -> None:
    with pytest.raises(DefinitionError, match=r"job must be a SparkJob\(...\), not str"):
        Pipeline("p", A, "spark_jobs/etl.py")  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["outlets", "inlets"])
@pytest.mark.parametrize("item", ["s3://bucket/b", A | B, None])
def test_outlets_and_inlets_are_assets_or_aliases(kind: str, item: Any) -> None:
    with pytest.raises(DefinitionError, match=f"pipeline 'p': {kind} are Assets or AssetAliases"):
        Pipeline("p", A, JOB, **{kind: [item]})


def test_outlets_and_inlets_keep_order_without_duplicates() -> None:
    pipeline = Pipeline("p", A, JOB, outlets=[B, L, Asset("again", "s3://bucket/b"), C], inlets=[C, C])
    assert pipeline.outlets == (B, L, C)
    assert pipeline.inlets == (C,)


def test_pipeline_is_immutable() -> None:
    pipeline = Pipeline("p", A, JOB)
    with pytest.raises(AttributeError, match="Pipeline is immutable"):
        pipeline.id = "q"  # type: ignore[misc]


def test_pipeline_equality_and_hash() -> None:
    one = Pipeline("p", A | B, JOB, outlets=[C])
    assert one == Pipeline("p", A | B, SparkJob("spark_jobs/etl.py"), outlets=[Asset("c", "s3://bucket/c")])
    assert one != Pipeline("p", A | B, JOB, outlets=[C], max_active_runs=1)
    assert one != Pipeline("p", A & B, JOB, outlets=[C])
    assert hash(one) == hash(Pipeline("p", A, JOB))
    assert (
        repr(one)
        == "Pipeline('p', schedule=AssetSchedule(AssetAny(Asset('s3://bucket/a'), Asset('s3://bucket/b'))))"
    )


# --- documents ----------------------------------------------------------------------------------


def test_pipeline_document_shape() -> None:
    pipeline = Pipeline(
        "p",
        PartitionedAssetSchedule(A, DailyMapper()),
        SparkJob("etl.py", ("--x",), {"k": "v"}),
        outlets=[B, L],
        inlets=[C],
        max_active_runs=2,
    )
    assert pipeline.to_json() == {
        "id": "p",
        "schedule": {
            "kind": "partitioned",
            "condition": {"type": "asset", "uri": "s3://bucket/a"},
            "mapper": {"grain": "daily"},
            "key": None,
        },
        "job": {"entry_point": "etl.py", "arguments": ["--x"], "spark_conf": {"k": "v"}},
        "outlets": [{"type": "asset", "uri": "s3://bucket/b"}, {"type": "alias", "name": "exports"}],
        "inlets": [{"type": "asset", "uri": "s3://bucket/c"}],
        "max_active_runs": 2,
        "batch": True,
        "partitioned": True,
        "debounce_seconds": None,
        "max_wait_seconds": None,
        "within_seconds": None,
        "skip_unchanged": False,
    }


@pytest.mark.parametrize(
    "pipeline",
    [
        Pipeline("p", A, JOB),
        Pipeline(
            "q", (A & B) | L, SparkJob("s3://b/j.py", ("--a", "1"), {"x": "y"}), outlets=[C, L], inlets=[A, L]
        ),
        Pipeline("r", A | B, JOB, batch=False, max_active_runs=3),
        Pipeline("s", AssetOrTimeSchedule("0 6 * * 1-5", [A, B], timezone="Europe/Berlin"), JOB, outlets=[C]),
        Pipeline("t", PartitionedAssetSchedule(A, DailyMapper()), JOB, outlets=[B], max_active_runs=1),
    ],
    ids=lambda p: p.id,
)
def test_pipeline_round_trip(pipeline: Pipeline) -> None:
    rebuilt = Pipeline.from_json(pipeline.to_json())
    assert rebuilt == pipeline
    assert rebuilt.to_json() == pipeline.to_json()
    assert rebuilt.schedule == pipeline.schedule


@pytest.mark.parametrize(
    "change",
    [
        {"id": "1bad"},
        {"job": {"entry_point": "etl.sh", "arguments": [], "spark_conf": {}}},
        {"job": {"entry_point": "etl.py"}},
        {"outlets": [{"type": "all", "of": [{"type": "asset", "uri": "a"}]}]},
        {"schedule": {"kind": "nope", "condition": {"type": "asset", "uri": "a"}}},
        {"max_active_runs": 0},
        {"batch": "yes"},
    ],
)
def test_pipeline_from_json_refuses_bad_documents(change: dict[str, Any]) -> None:
    doc = {**Pipeline("p", A, JOB).to_json(), **change}
    with pytest.raises(DocumentError):
        Pipeline.from_json(doc)


def test_pipeline_from_json_needs_every_key() -> None:
    doc = Pipeline("p", A, JOB).to_json()
    del doc["inlets"]
    with pytest.raises(DocumentError, match="invalid pipeline document"):
        Pipeline.from_json(doc)


# --- Metadata -----------------------------------------------------------------------------------


def test_metadata_with_an_asset() -> None:
    metadata = Metadata(B, extra={"rows": 10})
    assert metadata.asset is B
    assert metadata.alias is None
    assert metadata.to_json() == {"asset": "s3://bucket/b", "extra": {"rows": 10}, "alias": None}


def test_metadata_with_a_uri_string_normalises_it() -> None:
    metadata = Metadata("S3://bucket/b/", {"rows": 1})  # type: ignore[arg-type]
    assert metadata.asset == B
    assert metadata.to_json()["asset"] == "s3://bucket/b"


@pytest.mark.parametrize("alias", ["exports", AssetAlias("exports")])
def test_metadata_alias_by_name_or_object(alias: Any) -> None:
    metadata = Metadata(B, alias=alias)
    assert metadata.alias == "exports"
    assert metadata.to_json() == {"asset": "s3://bucket/b", "extra": {}, "alias": "exports"}


def test_metadata_extra_is_frozen_json() -> None:
    extra = {"files": ["a"]}
    metadata = Metadata(B, extra)
    extra["files"].append("b")
    assert metadata.to_json()["extra"] == {"files": ["a"]}
    with pytest.raises(DefinitionError, match="Metadata extra must be JSON-serialisable"):
        Metadata(B, {"when": object()})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"asset": 42}, "asset must be an Asset or a URI, not int"),
        ({"asset": L}, "asset must be an Asset or a URI, not AssetAlias"),
        ({"asset": B, "alias": ""}, "AssetAlias name must be a non-empty string"),
        ({"asset": "airflow://x"}, "reserved"),
    ],
)
def test_metadata_validation(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        Metadata(**kwargs)


# --- windows, skip_unchanged, schedule=None and time-only ----------------------------------------------


def test_windows_are_kept_and_round_trip() -> None:
    p = Pipeline(
        "p",
        A & B,
        JOB,
        debounce=timedelta(seconds=30),
        max_wait=timedelta(minutes=5),
        within=timedelta(hours=1),
    )
    assert (p.debounce, p.max_wait, p.within) == (
        timedelta(seconds=30),
        timedelta(minutes=5),
        timedelta(hours=1),
    )
    assert Pipeline.from_json(p.to_json()) == p
    assert p != Pipeline("p", A & B, JOB)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"debounce": 30}, "debounce must be a timedelta such as timedelta\\(minutes=5\\), not int"),
        ({"debounce": timedelta(0)}, "debounce must be between one second and 366 days"),
        ({"within": timedelta(days=400)}, "within must be between one second and 366 days"),
        ({"max_wait": timedelta(minutes=1)}, "max_wait bounds a debounce"),
        (
            {"debounce": timedelta(minutes=5), "max_wait": timedelta(minutes=1)},
            "max_wait .* must be at least debounce",
        ),
        ({"debounce": timedelta(minutes=1), "batch": False}, "debounce decide when a batch of events runs"),
        (
            {"within": timedelta(minutes=1), "schedule": None},
            "within apply to asset events; this schedule takes none",
        ),
        ({"debounce": timedelta(minutes=1), "schedule": "@daily"}, "apply to asset events"),
        (
            {"debounce": timedelta(minutes=1), "schedule": AssetAndTimeSchedule("@daily", A)},
            "under AssetAndTimeSchedule the tick starts runs",
        ),
        ({"skip_unchanged": "yes"}, "skip_unchanged must be True or False"),
        ({"skip_unchanged": True, "schedule": None}, "skip_unchanged=True skips unchanged asset events"),
        (
            {"batch": False, "schedule": AssetAndTimeSchedule("@daily", A)},
            "under this schedule events start no runs",
        ),
        ({"batch": False, "schedule": "@daily"}, "under this schedule events start no runs"),
    ],
)
def test_bad_windows_are_refused(kwargs: dict[str, Any], message: str) -> None:
    schedule = kwargs.pop("schedule", A)
    with pytest.raises(DefinitionError, match=message):
        Pipeline("p", schedule, JOB, **kwargs)


def test_within_is_allowed_under_asset_and_time() -> None:
    p = Pipeline("p", AssetAndTimeSchedule("@daily", A), JOB, within=timedelta(hours=1))
    assert p.within == timedelta(hours=1)


@pytest.mark.parametrize("schedule", [None, "@daily", timedelta(hours=1), "0 6 * * 1-5"])
def test_manual_and_time_only_pipelines(schedule: Any) -> None:
    p = Pipeline("p", schedule, JOB, outlets=[A])
    assert not p.schedule.has_assets and list(p.condition.iter_assets()) == []
    assert Pipeline.from_json(p.to_json()) == p


def test_metadata_carries_a_data_version() -> None:
    assert Metadata(B, {"rows": 1}, version="snap-42").to_json() == {
        "asset": "s3://bucket/b",
        "extra": {"rows": 1},
        "alias": None,
        "version": "snap-42",
    }
    with pytest.raises(DefinitionError, match="version must be a non-empty string"):
        Metadata(B, version="")
