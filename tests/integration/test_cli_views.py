"""The view commands of the CLI, in-process against DynamoDB Local (and moto's CloudFormation for --env)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.core.events import AssetEvent, Run
from assetflow.core.pipeline import Pipeline
from assetflow.loader import load_catalog
from assetflow.ports import NullBus
from assetflow.usecases.evaluate import Evaluator
from assetflow_dev import LOCAL_AWS_ENV, DynamoDbLocal, MotoServer, cli, client, free_port

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
PIPELINES = str(REPO_ROOT / "pipelines")
LANDING = "s3://assetflow-demo/landing/deliveries"
READINGS = "s3://assetflow-demo/iot/readings"
CURATED = "s3://assetflow-demo/curated/deliveries"
EVENT_KEYS = {"asset", "id", "timestamp", "extra", "source", "partition_key"}
RUN_KEYS = {
    "run_id",
    "pipeline",
    "state",
    "created_at",
    "partition_key",
    "job_run_id",
    "triggering_asset_events",
}


class StubLauncher:
    def submit(self, run: Run, pipeline: Pipeline) -> str:
        return f"job-{run.run_id[-12:]}"


@dataclass
class Cli:
    """Runs `assetflow` in-process against one table; ``json`` parses what ``--json`` printed."""

    endpoint: str
    table: str
    capsys: pytest.CaptureFixture[str]

    def run(self, *argv: str, target: bool = True) -> tuple[int, str, str]:
        args = list(argv)
        if target:
            args += ["--endpoint-url", self.endpoint, "--table", self.table, "--pipelines", PIPELINES]
        code = cli.main(args)
        captured = self.capsys.readouterr()
        return code, captured.out, captured.err

    def json(self, *argv: str) -> Any:
        code, out, err = self.run(*argv, "--json")
        assert code == 0, err
        return json.loads(out)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    # No endpoint, table or dev.json from the developer's shell or checkout leaks into these tests.
    for name in (
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_DYNAMODB",
        "AWS_ENDPOINT_URL_CLOUDFORMATION",
        "ASSETFLOW_TABLE",
        "AWS_PROFILE",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in LOCAL_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def store(dynamodb_client: Any) -> Iterator[DynamoDbStore]:
    table = f"cli-{uuid.uuid4().hex[:10]}"
    created = DynamoDbStore(dynamodb_client, table)
    created.create_table()
    yield created
    dynamodb_client.delete_table(TableName=table)


@pytest.fixture
def run_cli(
    store: DynamoDbStore, dynamodb_local: DynamoDbLocal, clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> Cli:
    return Cli(dynamodb_local.endpoint, store.table, capsys)


@pytest.fixture
def evaluator(store: DynamoDbStore) -> Evaluator:
    return Evaluator(
        catalog=load_catalog(PIPELINES),
        store=store,
        launcher=StubLauncher(),
        bus=NullBus(),
        clock=lambda: datetime.now(UTC),
    )


def emit(run_cli: Cli, evaluator: Evaluator, uri: str, *extra_args: str) -> dict[str, Any]:
    event = run_cli.json("events", "emit", uri, *extra_args)
    evaluator.handle_event(AssetEvent.from_json(event))
    return event


def test_events_emit_and_list(run_cli: Cli) -> None:
    event = run_cli.json("events", "emit", LANDING, "--extra", '{"rows": 5}', "--partition-key", "2026-11-21")
    assert set(event) == EVENT_KEYS
    assert event["asset"] == LANDING
    assert event["extra"] == {"rows": 5}
    assert event["partition_key"] == "2026-11-21"
    assert event["source"]["type"] == "api"
    assert event["source"]["principal"].startswith("cli")
    second = run_cli.json("events", "emit", LANDING)

    assert run_cli.json("events", "list", LANDING) == {"items": [second, event], "next": None}
    page = run_cli.json("events", "list", LANDING, "--limit", "1")
    assert page["items"] == [second] and page["next"]
    assert run_cli.json("events", "list", LANDING, "--limit", "1", "--next", page["next"])["items"] == [event]

    code, out, _ = run_cli.run("events", "list", LANDING)
    assert code == 0
    assert out.splitlines()[0].split() == ["TIMESTAMP", "ID", "SOURCE", "PARTITION", "EXTRA"]
    assert event["id"] in out and '{"rows":5}' in out


def test_events_emit_is_idempotent_with_a_key(run_cli: Cli) -> None:
    first = run_cli.json("events", "emit", LANDING, "--idempotency-key", "backfill-7")
    again = run_cli.json("events", "emit", LANDING, "--idempotency-key", "backfill-7")
    assert first == again
    assert len(run_cli.json("events", "list", LANDING)["items"]) == 1


def test_events_emit_refuses_bad_input(run_cli: Cli) -> None:
    code, _, err = run_cli.run("events", "emit", "airflow://dag")
    assert code == 1 and "reserved" in err
    code, _, err = run_cli.run("events", "emit", LANDING, "--extra", "[1]")
    assert code == 1 and "extra must be a JSON object" in err
    code, _, err = run_cli.run("events", "emit", LANDING, "--extra", "{bad")
    assert code == 1 and "not valid JSON" in err
    code, _, err = run_cli.run("events", "list", LANDING, "--limit", "0")
    assert code == 1 and "limit must be an integer from 1 to 1000" in err
    code, _, err = run_cli.run("events", "list", LANDING, "--next", "garbage")
    assert code == 1 and "page token" in err


def test_events_emit_warns_about_an_unknown_asset(run_cli: Cli) -> None:
    code, out, err = run_cli.run("events", "emit", "x-adhoc://one-off")
    assert code == 0
    assert "created event" in out
    assert "warning:" in err and "not declared in the catalog" in err


def test_assets_queue_runs_and_quarantine(run_cli: Cli, evaluator: Evaluator, store: DynamoDbStore) -> None:
    # Given events that queue one pipeline and run another
    readings = emit(run_cli, evaluator, READINGS)
    landing = emit(run_cli, evaluator, LANDING)

    assets = run_cli.json("assets", "list", "--limit", "1000")
    # Every declared asset, with or without events, each with its health.
    assert sorted(a["uri"] for a in assets["items"] if a["event_count"]) == sorted([READINGS, LANDING])
    assert len(assets["items"]) > 2 and all("health" in a for a in assets["items"])
    assert all(a["event_count"] == 1 for a in assets["items"] if a["uri"] in (READINGS, LANDING))
    code, out, _ = run_cli.run("assets", "list")
    assert "URI" in out.splitlines()[0] and "HEALTH" in out.splitlines()[0] and "iot_readings" in out

    queue = run_cli.json("queue", "list", "ops_dashboard")
    assert [q["event"] for q in queue["items"]] == [readings]
    assert queue["next"] is None
    assert (queue["updated"], queue["required"]) == (1, 3)
    code, out, _ = run_cli.run("queue", "list", "ops_dashboard")
    assert code == 0 and readings["id"] in out and "1 of 3 assets updated" in out

    runs = run_cli.json("runs", "list", "--pipeline", "deliveries_etl")
    (run,) = runs["items"]
    assert set(run) >= RUN_KEYS
    assert run["triggering_asset_events"] == {LANDING: [landing]}
    shown = run_cli.json("runs", "show", run["run_id"])
    assert shown["triggering_asset_events"] == {LANDING: [landing]}
    assert shown["produced_asset_events"] == {}
    code, out, _ = run_cli.run("runs", "show", run["run_id"])
    assert code == 0 and "triggering_asset_events:" in out and landing["id"] in out
    assert [r["run_id"] for r in run_cli.json("runs", "list")["items"]] == [run["run_id"]]
    code, out, _ = run_cli.run("runs", "list")
    assert code == 0 and "deliveries_etl" in out

    # When the queue is cleared
    assert run_cli.json("queue", "clear", "ops_dashboard", "--asset", READINGS) == {
        "pipeline": "ops_dashboard",
        "uri": READINGS,
        "deleted": 1,
    }
    assert run_cli.json("queue", "list", "ops_dashboard")["items"] == []
    code, out, _ = run_cli.run("queue", "clear", "ops_dashboard")
    assert code == 0 and "dropped 0 queued event(s)" in out

    store.quarantine(
        watcher="sensor_readings_kafka",
        reason="not JSON",
        body="\x00garbage",
        facts={"topic": "readings", "partition": 0, "offset": 9},
        identity="kafka:readings:0:9",
        now=datetime.now(UTC),
    )
    quarantined = run_cli.json("quarantine", "list")
    assert [q["identity"] for q in quarantined["items"]] == ["kafka:readings:0:9"]
    code, out, _ = run_cli.run("quarantine", "list")
    assert code == 0 and "not JSON" in out


def test_unknown_pipeline_and_run(run_cli: Cli) -> None:
    for argv in (
        ("queue", "list", "nope"),
        ("queue", "clear", "nope"),
        ("runs", "list", "--pipeline", "nope"),
    ):
        code, _, err = run_cli.run(*argv)
        assert code == 1 and "no pipeline 'nope'" in err, err
    code, _, err = run_cli.run("runs", "show", "run-missing")
    assert code == 1 and "no run 'run-missing'" in err


def test_no_table_names_the_options(run_cli: Cli) -> None:
    code, _, err = run_cli.run("assets", "list", target=False)
    assert code == 1
    for option in ("--table", "ASSETFLOW_TABLE", "--env", "assetflow dev up"):
        assert option in err


def test_a_missing_table_and_an_unreachable_endpoint_are_clear(run_cli: Cli) -> None:
    code, _, err = run_cli.run(
        "assets", "list", "--endpoint-url", run_cli.endpoint, "--table", "absent", target=False
    )
    assert code == 1 and "'absent'" in err and "does not exist" in err
    dead = f"http://127.0.0.1:{free_port()}"
    code, _, err = run_cli.run("assets", "list", "--endpoint-url", dead, "--table", "t", target=False)
    assert code == 1 and "cannot reach" in err and dead in err


def test_dev_json_gives_the_endpoint_and_the_table(run_cli: Cli, clean_env: Path) -> None:
    run_cli.json("events", "emit", LANDING)
    dev = clean_env / ".assetflow"
    dev.mkdir()
    (dev / "dev.json").write_text(
        json.dumps({"endpoints": {"dynamodb": run_cli.endpoint}, "env": {}, "table": run_cli.table})
    )
    code, out, err = run_cli.run("events", "list", LANDING, "--json", target=False)
    assert code == 0, err
    assert len(json.loads(out)["items"]) == 1

    (dev / "dev.json").write_text(json.dumps({"endpoints": {"dynamodb": run_cli.endpoint}, "env": {}}))
    code, _, err = run_cli.run("assets", "list", target=False)
    assert code == 1 and 'names no table (key "table")' in err


def test_env_reads_the_table_from_the_stack_outputs(
    run_cli: Cli, moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = f"t{uuid.uuid4().hex[:8]}"
    cloudformation = client("cloudformation", moto_server.endpoint)
    template = {
        "Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
        "Outputs": {
            "TableName": {"Value": run_cli.table},
            "ApiUrl": {"Value": "https://example.execute-api.us-east-1.amazonaws.com/"},
        },
    }
    cloudformation.create_stack(StackName=f"assetflow-{env}", TemplateBody=json.dumps(template))
    monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDFORMATION", moto_server.endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", run_cli.endpoint)
    run_cli.json("events", "emit", LANDING)

    code, out, err = run_cli.run("events", "list", LANDING, "--env", env, "--json", target=False)
    assert code == 0, err
    assert len(json.loads(out)["items"]) == 1

    code, _, err = run_cli.run("assets", "list", "--env", "missing", target=False)
    assert code == 1 and "no stack 'assetflow-missing'" in err
