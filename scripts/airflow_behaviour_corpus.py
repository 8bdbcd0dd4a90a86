"""Record how Apache Airflow 3.3 builds assets, evaluates asset conditions and fires time schedules.

The fixture of the behaviour parity tests (``tests/unit/test_airflow_parity_behaviour.py``). Run it with an
interpreter that has ``apache-airflow-task-sdk`` and ``apache-airflow-core`` installed, never the project's
own one::

    /work/airflow-venv/bin/python scripts/airflow_behaviour_corpus.py [--out FIXTURE.json]

Three parts, each an input written as text that both sides evaluate, and Airflow's outcome:

- ``constructors``: calls of ``Asset``, ``AssetAlias`` and ``Asset.ref`` as users write them; the name, URI and
  group Airflow keeps, or that it refuses the call;
- ``conditions``: schedules built with ``&``, ``|``, lists (``all_of``) and an alias ``L``, and for every set of
  assets with a queued event and every resolution of ``L``, whether Airflow's scheduler would run the DAG
  (``airflow.assets.evaluation.AssetEvaluator`` on the serialised condition, the alias resolved as given);
- ``schedules``: time schedules (cron strings, presets, ``timedelta``) and the times Airflow's timetables fire
  at within a window (``next_dagrun_info`` with catchup, as the scheduler asks).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import sys
import tempfile
import warnings
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import Any

DEFAULT_OUT = (
    Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "airflow" / "behaviour_corpus.json"
)
DISTRIBUTIONS = ("apache-airflow-task-sdk", "apache-airflow-core")

#: Calls as users write them; ``Asset`` and ``AssetAlias`` are each side's own.
CONSTRUCTORS = [
    'Asset("orders")',
    'Asset("s3://bucket/orders")',
    'Asset(name="orders")',
    'Asset(uri="s3://bucket/orders")',
    'Asset("orders", "s3://bucket/orders")',
    'Asset(name="orders", uri="s3://bucket/orders")',
    'Asset("orders", "s3://bucket/orders", group="raw")',
    'Asset("orders", uri="s3://bucket/orders", extra={"owner": "ops"})',
    'Asset(uri="s3://bucket/orders", group="raw")',
    'Asset("s3://bucket/orders", name="orders")',
    "Asset()",
    'Asset(name="")',
    'Asset("orders", "s3://bucket/orders", group="")',
    'Asset("orders", "s3://bucket/orders", extra="not a dict")',
    'AssetAlias("exports")',
    'AssetAlias(name="exports")',
    'AssetAlias("exports", group="partners")',
    'AssetAlias("")',
    'Asset.ref(name="orders")',
    'Asset.ref(uri="s3://bucket/orders")',
]

#: Conditions over a, b, c, d and the alias L; ``all_of(...)`` is a list schedule (``schedule=[...]``).
CONDITIONS = [
    "a",
    "a & b",
    "a | b",
    "all_of(a, b, c)",
    "(a | b) & c",
    "a | (b & c)",
    "(a & b) | (c & d)",
    "(a | b) & (c | d)",
    "a & (b | (c & d))",
    "L",
    "a & L",
    "a | L",
    "(a | L) & b",
    "all_of(a, L)",
    "(a & L) | (b & d)",
]
ASSETS = ("a", "b", "c", "d")
#: Resolutions of the alias L (the assets a producing run added to it).
RESOLUTIONS = {"none": [], "c": ["c"], "c_and_d": ["c", "d"]}

#: Time schedules as ``schedule=`` takes them (``timedelta`` written as text), with a time zone.
SCHEDULES = [
    ("0 6 * * 1-5", "UTC"),
    ("0 6 * * 1-5", "Europe/Berlin"),
    ("@daily", "UTC"),
    ("@hourly", "UTC"),
    ("@weekly", "UTC"),
    ("@monthly", "UTC"),
    ("*/15 * * * *", "UTC"),
    ("30 2 * * *", "Europe/Berlin"),
    ("0 0 1,15 * *", "America/New_York"),
    ("timedelta(hours=7)", "UTC"),
    ("timedelta(minutes=45)", "UTC"),
]
#: The window the fire times are taken in: across the 2026 spring DST change in Europe (29 March).
WINDOW = (datetime(2026, 3, 27, 0, 0, tzinfo=UTC), datetime(2026, 4, 2, 0, 0, tzinfo=UTC))


def _shape(value: Any) -> dict[str, Any]:
    kind = type(value).__name__
    if kind in ("AssetNameRef", "AssetUriRef"):
        return {"type": "ref", "name": getattr(value, "name", None), "uri": getattr(value, "uri", None)}
    if kind == "AssetAlias":
        return {"type": "alias", "name": value.name, "group": value.group}
    extra = value.extra if isinstance(value.extra, dict) else f"<{type(value.extra).__name__}>"
    return {"type": "asset", "name": value.name, "uri": value.uri, "group": value.group, "extra": extra}


def constructor_outcome(call: str) -> dict[str, Any]:
    """What Airflow's SDK makes of one call, or the class of its refusal."""
    from airflow.sdk import Asset, AssetAlias

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            value = eval(call, {"Asset": Asset, "AssetAlias": AssetAlias})  # noqa: S307 (our own corpus)
        except Exception as exc:  # the refusal is the outcome
            return {"error": type(exc).__name__}
    return _shape(value)


def condition_outcomes(expression: str) -> dict[str, dict[str, bool]]:
    """For each resolution of L and each set of queued assets, whether Airflow's scheduler runs the DAG."""
    from airflow.assets.evaluation import AssetEvaluator
    from airflow.sdk import Asset, AssetAlias
    from airflow.sdk.definitions.asset import AssetAll
    from airflow.serialization.definitions.assets import SerializedAssetUniqueKey
    from airflow.serialization.encoders import ensure_serialized_asset

    assets = {n: Asset(n, f"x-test://{n}") for n in ASSETS}
    namespace: dict[str, Any] = {**assets, "L": AssetAlias("L"), "all_of": lambda *xs: AssetAll(*xs)}
    serialized = ensure_serialized_asset(eval(expression, namespace))  # noqa: S307 (our own corpus)

    def key(name: str) -> Any:
        return SerializedAssetUniqueKey.from_asset(ensure_serialized_asset(assets[name]))

    outcomes: dict[str, dict[str, bool]] = {}
    for label, resolved in RESOLUTIONS.items():

        class Evaluator(AssetEvaluator):  # the alias resolves as given, without a database
            def _resolve_asset_alias(self, o: Any, names: list[str] = resolved) -> list[Any]:
                return [ensure_serialized_asset(assets[n]) for n in names] if o.name == "L" else []

        evaluator = Evaluator(session=None)
        outcomes[label] = {}
        for size in range(len(ASSETS) + 1):
            for queued in itertools.combinations(ASSETS, size):
                statuses = {key(n): True for n in queued}
                outcomes[label]["".join(queued) or "-"] = bool(evaluator.run(serialized, statuses))
    return outcomes


def schedule_outcome(schedule: str, timezone: str) -> dict[str, Any]:
    """The times Airflow's timetable for ``schedule=`` fires at in the window (UTC), or its refusal."""
    import pendulum
    from airflow.timetables.base import TimeRestriction
    from airflow.timetables.trigger import CronTriggerTimetable, DeltaTriggerTimetable

    start, end = (pendulum.instance(t) for t in WINDOW)
    try:
        if schedule.startswith("timedelta("):
            timetable: Any = DeltaTriggerTimetable(eval(schedule, {"timedelta": timedelta}))  # noqa: S307
        else:
            timetable = CronTriggerTimetable(schedule, timezone=timezone)
    except Exception as exc:
        return {"error": type(exc).__name__}
    fired: list[str] = []
    last = None
    for _ in range(1000):
        info = timetable.next_dagrun_info(
            last_automated_data_interval=last,
            restriction=TimeRestriction(earliest=start, latest=end, catchup=True),
        )
        if info is None:
            break
        fired.append(info.run_after.in_timezone("UTC").strftime("%Y-%m-%dT%H:%M:%SZ"))
        last = info.data_interval
    return {"fires": fired}


def versions() -> dict[str, str]:
    """The versions of Python and Airflow that the corpus is measured with."""
    found = {"python": platform.python_version()}
    for name in DISTRIBUTIONS:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def build() -> dict[str, Any]:
    """Run every input through Airflow and return the fixture document."""
    return {
        "generator": "scripts/airflow_behaviour_corpus.py",
        "versions": versions(),
        "window": [t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in WINDOW],
        "constructors": [{"call": c, "airflow": constructor_outcome(c)} for c in CONSTRUCTORS],
        "conditions": [{"expression": e, "airflow": condition_outcomes(e)} for e in CONDITIONS],
        "schedules": [
            {"schedule": s, "timezone": tz, "airflow": schedule_outcome(s, tz)} for s, tz in SCHEDULES
        ],
    }


def main(argv: list[str] | None = None) -> int:
    """Write the fixture; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as home:
        os.environ["AIRFLOW_HOME"] = home  # Airflow creates $AIRFLOW_HOME/logs on import
        try:
            document = build()
        except ImportError as exc:
            print(f"Airflow is not importable with {sys.executable}: {exc}", file=sys.stderr)
            return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    cases = sum(len(v) for c in document["conditions"] for v in c["airflow"].values())
    print(
        f"{len(document['constructors'])} constructor calls, {cases} condition cases, "
        f"{len(document['schedules'])} schedules written to {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
