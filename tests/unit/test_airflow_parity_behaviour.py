"""Constructors, condition evaluation and time schedules against Apache Airflow 3.3's own behaviour.

The corpus (``tests/fixtures/airflow/behaviour_corpus.json``) is recorded by
``scripts/airflow_behaviour_corpus.py`` with Airflow's task SDK and core installed. Each input is evaluated by
assetflow here and must give Airflow's outcome, except for the deliberate differences listed (each with its
reason, also in docs/migration.md).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from assetflow import Asset, AssetAlias, Pipeline, SparkJob
from assetflow.core.conditions import AssetRef, as_condition
from assetflow.core.cron import TimeSpec
from assetflow.core.decision import decide
from assetflow.core.entries import QueueState
from assetflow.core.events import AssetEvent
from assetflow.core.jsonvalue import thaw_json
from assetflow.core.scheduler import route_event

ROOT = Path(__file__).resolve().parents[2]
CORPUS = json.loads((ROOT / "tests" / "fixtures" / "airflow" / "behaviour_corpus.json").read_text())
JOB = SparkJob("jobs/job.py")
T0 = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)

#: Calls Airflow accepts and assetflow refuses on purpose (the reason is the refusal's message).
DELIBERATE_CONSTRUCTORS = {
    'Asset("orders", "s3://bucket/orders", group="")': "an empty group names nothing (Airflow keeps '')",
    'Asset("orders", "s3://bucket/orders", extra="not a dict")': "extra is a JSON object (Airflow keeps a str)",
}
#: Schedules whose fire times differ on purpose: EventBridge Scheduler runs them on AWS, and it skips a cron
#: time the clocks jump over in spring (Airflow's croniter fires it an hour late).
DELIBERATE_SCHEDULES = {("30 2 * * *", "Europe/Berlin"): "2026-03-29T01:30:00Z"}


def ours_constructed(call: str) -> dict[str, Any]:
    try:
        value = eval(call, {"Asset": Asset, "AssetAlias": AssetAlias})  # noqa: S307 (the corpus's own calls)
    except (TypeError, ValueError) as exc:
        return {"error": type(exc).__name__, "message": str(exc)}
    if isinstance(value, AssetRef):
        return {"type": "ref", "name": value.ref_name, "uri": value.ref_uri}
    if isinstance(value, AssetAlias):
        return {"type": "alias", "name": value.name, "group": value.group}
    return {
        "type": "asset",
        "name": value.name,
        "uri": value.uri,
        "group": value.group,
        "extra": thaw_json(value.extra),
    }


@pytest.mark.parametrize("entry", CORPUS["constructors"], ids=lambda e: e["call"])
def test_constructors_build_what_airflow_builds(entry: dict[str, Any]) -> None:
    airflow, ours = entry["airflow"], ours_constructed(entry["call"])
    if entry["call"] in DELIBERATE_CONSTRUCTORS:
        assert "error" not in airflow and "error" in ours, ours
        assert ours["message"], DELIBERATE_CONSTRUCTORS[entry["call"]]
    elif "error" in airflow:
        assert "error" in ours, (
            f"Airflow refuses {entry['call']} ({airflow['error']}); assetflow built {ours}"
        )
    else:
        assert ours == airflow


ASSETS = {n: Asset(n, f"x-test://{n}") for n in "abcd"}
RESOLUTIONS = {"none": (), "c": ("c",), "c_and_d": ("c", "d")}


def ours_run(expression: str, resolved: tuple[str, ...], queued: str) -> bool:
    """Whether assetflow runs a pipeline on ``expression`` once an event of each ``queued`` asset is routed."""
    namespace: dict[str, Any] = {
        **ASSETS,
        "L": AssetAlias("L"),
        "all_of": lambda *xs: as_condition(list(xs), "all_of"),
    }
    pipeline = Pipeline("p", eval(expression, namespace), JOB)  # noqa: S307 (the corpus's own expressions)
    entries = []
    for n, name in enumerate(queued.replace("-", "")):
        event = AssetEvent(ASSETS[name].uri, f"e{n}", T0 + timedelta(seconds=n), source={"type": "api"})
        aliases = ("L",) if name in resolved else ()
        routes, _ = route_event(event, [(pipeline, aliases)])
        entries += [route.entry(event) for route in routes]
    state = QueueState("p", entries=tuple(entries))
    return decide(pipeline, state, active_runs=0, now=T0 + timedelta(minutes=1)).due


@pytest.mark.parametrize("entry", CORPUS["conditions"], ids=lambda e: e["expression"])
def test_conditions_run_when_airflows_scheduler_runs_the_dag(entry: dict[str, Any]) -> None:
    differences = [
        (label, queued, expected)
        for label, cases in entry["airflow"].items()
        for queued, expected in cases.items()
        if ours_run(entry["expression"], RESOLUTIONS[label], queued) is not expected
    ]
    assert differences == [], f"{entry['expression']}: (resolution, queued, Airflow's answer) {differences}"


def ours_fires(schedule: str, timezone: str) -> list[str]:
    start, end = (datetime.fromisoformat(t.replace("Z", "+00:00")) for t in CORPUS["window"])
    if schedule.startswith("timedelta("):
        # Airflow's DeltaTriggerTimetable counts from the DAG's start; a TimeSpec's start is EventBridge's StartDate.
        spec = TimeSpec(eval(schedule, {"timedelta": timedelta}), timezone, start=start)  # noqa: S307
    else:
        spec = TimeSpec(schedule, timezone)
    fired = spec.ticks_between(start - timedelta(microseconds=1), end)
    return [t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in fired]


@pytest.mark.parametrize("entry", CORPUS["schedules"], ids=lambda e: f"{e['schedule']} {e['timezone']}")
def test_time_schedules_fire_when_airflows_timetables_fire(entry: dict[str, Any]) -> None:
    airflow = entry["airflow"]["fires"]
    ours = ours_fires(entry["schedule"], entry["timezone"])
    skipped = DELIBERATE_SCHEDULES.get((entry["schedule"], entry["timezone"]))
    if skipped is not None:
        assert skipped in airflow and skipped not in ours
        airflow = [t for t in airflow if t != skipped]
    assert ours == airflow


def test_the_corpus_was_recorded_with_airflow_3_3() -> None:
    assert CORPUS["versions"]["apache-airflow-core"].startswith("3.3")
    assert sum(len(v) for c in CORPUS["conditions"] for v in c["airflow"].values()) >= 700
