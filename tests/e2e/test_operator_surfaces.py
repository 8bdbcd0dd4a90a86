"""The operator's surfaces on the real local runtime: the API, the CLI and the web page in headless Chromium.

One runtime (DynamoDB Local, moto, the real functions driven by the pollers, the EMR-API launcher so that runs
end at once) serves every test of the module; each test uses its own pipelines so that they do not meet.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from assetflow_dev.api_client import ApiClient, local_client
from assetflow_dev.runtime import REPO_ROOT, LocalRuntime, RuntimeOptions
from tests.ui.conftest import CHROMIUM, CHROMIUM_ARGS

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DEFINITIONS = """
from datetime import timedelta

from assetflow import Asset, AssetWatcher, PartitionedAssetSchedule, Pipeline, SparkJob, SqsQueue

orders = Asset("orders", "x-e2e://orders")
customers = Asset("customers", "x-e2e://customers")
report = Asset("report", "x-e2e://report")
page_in = Asset("page_in", "x-e2e://page/in")
JOB = SparkJob("jobs/noop.py")

etl = Pipeline("etl", schedule=orders & customers, job=JOB, outlets=[report], max_active_runs=1)
by_hand = Pipeline("by_hand", schedule=None, job=JOB, max_active_runs=1)
hourly = Pipeline("hourly", schedule=timedelta(hours=1), job=JOB)
page_etl = Pipeline("page_etl", schedule=page_in, job=JOB)
page_hand = Pipeline("page_hand", schedule=None, job=JOB)
feed = AssetWatcher("feed", SqsQueue("feed"))
fed_one = Asset("fed_one", "x-e2e://fed/one", watchers=[feed])
fed_two = Asset("fed_two", "x-e2e://fed/two", watchers=[feed])
debounce_in = Asset("debounce_in", "x-e2e://debounce/in")
debounced = Pipeline("debounced", schedule=debounce_in, job=JOB, debounce=timedelta(seconds=2))
cond_orders = Asset("cond_orders", "x-e2e://cond/orders")
cond_payments = Asset("cond_payments", "x-e2e://cond/payments")
big_orders = Pipeline(
    "big_orders", schedule=cond_orders.where({"amount": [{"numeric": [">", 100]}]}), job=JOB
)
per_tenant = Pipeline(
    "per_tenant", schedule=PartitionedAssetSchedule(cond_orders & cond_payments, key="tenant"), job=JOB
)
once_per_version = Pipeline(
    "once_per_version",
    schedule=cond_payments,
    job=SparkJob("jobs/noop.py", code_version="2"),
    skip_unchanged=True,
)
"""


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRuntime]:
    project = tmp_path_factory.mktemp("operator-project")
    (project / "pipelines").mkdir()
    (project / "pipelines" / "defs.py").write_text(textwrap.dedent(DEFINITIONS))
    (project / "jobs").mkdir()
    (project / "jobs" / "noop.py").write_text("print('never run: the emr-api launcher only calls the API')\n")
    (project / "pyproject.toml").write_text("[project]\nname = 'operator-project'\n")
    options = RuntimeOptions(
        pipelines=str(project / "pipelines"),
        work_dir=project / ".assetflow",
        launcher="emr-api",
        function_log=project / ".assetflow" / "logs" / "functions.log",
    )
    with LocalRuntime(options) as started:
        yield started


@pytest.fixture(scope="module")
def api(runtime: LocalRuntime) -> ApiClient:
    return local_client(runtime.dev_config())


def call(api: ApiClient, method: str, path: str, doc: Any = None, status: int = 200) -> Any:
    answer = api.call(method, path, doc)
    assert answer.status == status, (method, path, answer.status, answer.doc)
    return answer.doc


def wait_for(check: Callable[[], Any], timeout: float = 30.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what or check}")


def emit(api: ApiClient, uri: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return call(api, "POST", "/assets/events", {"uri": uri, "extra": extra or {}}, status=201)  # type: ignore[no-any-return]


def runs_of(api: ApiClient, pipeline: str) -> list[dict[str, Any]]:
    return call(api, "GET", f"/pipelines/{pipeline}/runs")["items"]  # type: ignore[no-any-return]


def test_explain_pause_trigger_cancel_replay_and_backfill_through_the_api(api: ApiClient) -> None:
    # Waiting for assets: explain and the queue say 1 of 2 and what is missing; every declared asset is listed.
    emit(api, "x-e2e://orders", {"n": 1})
    explained = wait_for(
        lambda: (doc := call(api, "GET", "/pipelines/etl/explain"))["updated"] == 1 and doc,
        what="the event queued",
    )
    assert (explained["due"], explained["blocked_by"], explained["missing"]) == (
        False,
        "assets",
        ["x-e2e://customers"],
    )
    assert explained["condition"]["op"] == "all" and explained["required"] == 2
    queue = call(api, "GET", "/pipelines/etl/queue")
    assert (queue["updated"], queue["required"], len(queue["items"])) == (1, 2, 1)
    assets = {a["uri"]: a for a in call(api, "GET", "/assets")["items"]}
    assert {"x-e2e://orders", "x-e2e://customers", "x-e2e://report"} <= set(assets)
    assert (
        assets["x-e2e://customers"]["event_count"] == 0 and assets["x-e2e://customers"]["health"] == "fresh"
    )

    # Paused: the second event queues, no run starts, explain says paused; unpausing runs it.
    assert call(api, "POST", "/pipelines/etl/pause") == {"pipeline": "etl", "paused": True, "changed": True}
    emit(api, "x-e2e://customers", {"n": 2})
    paused = wait_for(
        lambda: (doc := call(api, "GET", "/pipelines/etl/explain"))["updated"] == 2 and doc,
        what="both queued",
    )
    assert (paused["blocked_by"], paused["paused"]) == ("paused", True)
    assert runs_of(api, "etl") == []
    unpaused = call(api, "POST", "/pipelines/etl/unpause")
    assert unpaused["paused"] is False and len(unpaused["runs"]) == 1
    (asset_run,) = runs_of(api, "etl")
    assert asset_run["triggered_by"] == "assets" and asset_run["conf"] is None
    wait_for(
        lambda: call(api, "GET", f"/runs/{asset_run['run_id']}")["state"] == "success", what="the run's end"
    )

    # A manual run of a manual-only pipeline, with its conf: 201 with the run; it ends as any run.
    manual = call(api, "POST", "/pipelines/by_hand/runs", {"conf": {"full_refresh": True}}, status=201)
    assert (manual["triggered_by"], manual["conf"], manual["triggering_asset_events"]) == (
        "manual",
        {"full_refresh": True},
        {},
    )
    wait_for(
        lambda: call(api, "GET", f"/runs/{manual['run_id']}")["state"] == "success", what="the manual run"
    )
    # Replay: a new run with the same events and conf.
    replay = call(api, "POST", f"/runs/{manual['run_id']}/replay", status=201)
    assert (replay["triggered_by"], replay["replay_of"], replay["conf"]) == (
        "replay",
        manual["run_id"],
        {"full_refresh": True},
    )
    events_replay = call(api, "POST", f"/runs/{asset_run['run_id']}/replay", status=201)
    assert events_replay["triggering_asset_events"] == asset_run["triggering_asset_events"]

    # Cancel: a finished run is refused (nothing changes); a run held by a pause is cancelled.
    refused = api.call("POST", f"/runs/{manual['run_id']}/cancel")
    assert (refused.status, refused.doc["error"]) == (409, "invalid_state")
    assert call(api, "GET", f"/runs/{manual['run_id']}")["state"] == "success"
    call(api, "POST", "/pipelines/by_hand/pause")
    held = call(api, "POST", "/pipelines/by_hand/runs", status=201)
    assert (held["state"], held["job_run_id"]) == ("queued", None)
    assert call(api, "GET", "/pipelines/by_hand/explain")["held_runs"] == 1
    cancelled = call(api, "POST", f"/runs/{held['run_id']}/cancel", {})
    assert cancelled["state"] == "cancelled"
    call(api, "POST", "/pipelines/by_hand/unpause")

    # Backfill the window of the two events: the run the schedule would have made, once, however often asked.
    now = datetime.now(UTC)
    window = {"start": (now - timedelta(hours=1)).isoformat(), "end": now.isoformat()}
    dry = call(api, "POST", "/pipelines/etl/backfill", {**window, "dry_run": True})
    assert [r["state"] for r in dry["runs"]] == ["planned"] and dry["events"] == 2
    made = call(api, "POST", "/pipelines/etl/backfill", window)
    again = call(api, "POST", "/pipelines/etl/backfill", window)
    assert (made["created"], again["created"], again["existing"]) == (1, 0, 1)
    assert made["runs"][0]["triggered_by"] == "backfill"
    assert [r["run_id"] for r in again["runs"]] == [r["run_id"] for r in dry["runs"]]


def test_one_source_feeding_two_assets_makes_one_event_of_each(runtime: LocalRuntime, api: ApiClient) -> None:
    sqs = runtime.client("sqs")
    url = runtime.dev_config()["queues"]["feed"]["url"]
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"batch": 42}))

    def events_of(uri: str) -> list[dict[str, Any]]:
        return api.call("GET", "/assets/events", query={"uri": uri}).doc["items"]  # type: ignore[no-any-return]

    one = wait_for(lambda: events_of("x-e2e://fed/one"), what="the event of the first asset")
    two = wait_for(lambda: events_of("x-e2e://fed/two"), what="the event of the second asset")
    assert len(one) == len(two) == 1 and one[0]["id"] != two[0]["id"]
    assert one[0]["extra"]["payload"] == two[0]["extra"]["payload"] == {"batch": 42}
    assert one[0]["source"] == two[0]["source"] == {"type": "watcher", "watcher": "feed", "kind": "sqs"}


def test_a_debounced_pipeline_runs_once_quiet_woken_by_its_deadline(api: ApiClient) -> None:
    # Two events a moment apart: no run while they keep coming; the wake-up at the deadline starts one run.
    first = emit(api, "x-e2e://debounce/in", {"n": 1})
    second = emit(api, "x-e2e://debounce/in", {"n": 2})
    waiting = wait_for(
        lambda: (doc := call(api, "GET", "/pipelines/debounced/explain"))["queued"] == 2 and doc,
        timeout=10,
        what="both events queued",
    )
    if waiting["blocked_by"] is not None:  # on a busy machine the deadline may have passed already
        assert waiting["blocked_by"] == "debounce" and waiting["wake_at"]
    (run,) = wait_for(lambda: runs_of(api, "debounced"), timeout=20, what="the wake-up's run")
    assert run["triggered_by"] == "assets"
    assert [e["id"] for e in run["triggering_asset_events"]["x-e2e://debounce/in"]] == [
        first["id"],
        second["id"],
    ]
    assert call(api, "GET", "/pipelines/debounced/explain")["queued"] == 0


@pytest.mark.parametrize(
    ("method", "path", "doc", "status", "code"),
    [
        ("POST", "/pipelines/nope/runs", None, 404, "not_found"),
        ("POST", "/pipelines/by_hand/runs", {"conf": [1, 2]}, 400, "bad_request"),
        ("POST", "/pipelines/by_hand/runs", {"colour": "red"}, 400, "bad_request"),
        ("GET", "/pipelines/nope/explain", None, 404, "not_found"),
        ("POST", "/runs/run-nope/cancel", None, 404, "not_found"),
        ("POST", "/runs/run-nope/replay", None, 404, "not_found"),
        ("POST", "/pipelines/nope/pause", None, 404, "not_found"),
        (
            "POST",
            "/pipelines/hourly/backfill",
            {"start": "2999-01-01T00:00:00Z", "end": "2999-01-02T00:00:00Z"},
            400,
            "bad_request",
        ),
        (
            "POST",
            "/pipelines/hourly/backfill",
            {"start": "2026-01-02T00:00:00Z", "end": "2026-01-01T00:00:00Z"},
            400,
            "bad_request",
        ),
        (
            "POST",
            "/pipelines/hourly/backfill",
            {"start": "yesterday", "end": "2026-01-01T00:00:00Z"},
            400,
            "bad_request",
        ),
        (
            "POST",
            "/pipelines/by_hand/backfill",
            {"start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z"},
            400,
            "bad_request",
        ),
    ],
)
def test_bad_input_is_refused_clearly_and_changes_nothing(
    api: ApiClient, method: str, path: str, doc: Any, status: int, code: str
) -> None:
    before = call(api, "GET", "/runs", None)["items"]
    answer = api.call(method, path, doc)
    assert (answer.status, answer.doc["error"]) == (status, code), answer.doc
    assert answer.doc["detail"]
    assert call(api, "GET", "/runs")["items"] == before


def cli(runtime: LocalRuntime, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return subprocess.run(
        [sys.executable, "-m", "assetflow_dev.cli", *args],
        cwd=runtime.work_dir.parent,
        env=env | {"PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_cli_acts_through_the_local_api_and_explains_from_the_store(
    runtime: LocalRuntime, api: ApiClient
) -> None:
    triggered = cli(runtime, "runs", "trigger", "hourly", "--conf", '{"source": "cli"}', "--json")
    assert triggered.returncode == 0, triggered.stderr
    run = json.loads(triggered.stdout)
    assert (run["triggered_by"], run["conf"]) == ("manual", {"source": "cli"})
    explained = cli(runtime, "explain", "hourly", "--json")
    assert explained.returncode == 0, explained.stderr
    assert json.loads(explained.stdout)["blocked_by"] == "time"
    text = cli(runtime, "explain", "etl")
    assert text.returncode == 0 and "assets updated" in text.stdout, text
    paused = cli(runtime, "pipelines", "pause", "hourly")
    assert paused.returncode == 0 and "hourly paused" in paused.stdout
    assert call(api, "GET", "/pipelines/hourly/explain")["blocked_by"] == "paused"
    assert cli(runtime, "pipelines", "unpause", "hourly").returncode == 0
    refused = cli(runtime, "runs", "cancel", "run-nope")
    assert refused.returncode == 1 and "no run 'run-nope'" in refused.stderr
    bad = cli(runtime, "runs", "trigger", "hourly", "--conf", "[1]")
    assert bad.returncode == 2 and "--conf must be a JSON object" in bad.stderr
    future = cli(
        runtime, "backfill", "hourly", "--start", "2999-01-01T00:00:00Z", "--end", "2999-01-02T00:00:00Z"
    )
    assert future.returncode == 1 and "future" in future.stderr


# ---- the web page in headless Chromium, against this runtime -------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium, or set ASSETFLOW_CHROMIUM)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


def test_the_page_works_against_the_real_runtime(runtime: LocalRuntime, api: ApiClient, browser: Any) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"uncaught: {error}"))
    try:
        page.goto(runtime.dev_config()["ui"])
        expect(page.get_by_test_id("connection")).to_contain_text("Live", timeout=20_000)
        graph_node = page.locator('[data-testid="graph-node"][data-kind="pipeline"][data-id="page_etl"]')
        expect(graph_node).to_be_visible()

        # Explain of a pipeline, from the real API.
        graph_node.click()
        expect(page.get_by_test_id("explain-updated")).to_have_text("0 of 1 assets updated", timeout=15_000)
        expect(page.get_by_test_id("explain-blocked")).to_have_attribute("data-blocked-by", "assets")

        # Emit an event from the form: the pipeline runs (the EMR-API launcher ends it at once).
        form = page.get_by_test_id("emit-form")
        form.get_by_label("Asset URI").fill("x-e2e://page/in")
        form.get_by_label("Extra").fill('{"from": "the page"}')
        form.get_by_role("button", name="Emit event").click()
        expect(page.get_by_test_id("emit-created")).to_contain_text("Created event", timeout=15_000)
        (run,) = wait_for(lambda: runs_of(api, "page_etl"), what="the page's event to make a run")
        row = page.get_by_test_id("runs").locator(f'[data-testid="run-row"][data-id="{run["run_id"]}"]')
        expect(row).to_be_visible(timeout=15_000)

        # Pause and unpause from the buttons; explain follows.
        page.get_by_role("button", name="Pause", exact=True).click()
        expect(page.get_by_test_id("explain-blocked")).to_have_attribute(
            "data-blocked-by", "paused", timeout=15_000
        )
        assert call(api, "GET", "/pipelines/page_etl/explain")["paused"] is True
        page.get_by_role("button", name="Unpause", exact=True).click()
        expect(page.get_by_test_id("explain-blocked")).not_to_have_attribute(
            "data-blocked-by", "paused", timeout=15_000
        )

        # Trigger a manual run of another pipeline with a conf from the form.
        page.locator('[data-testid="graph-node"][data-kind="pipeline"][data-id="page_hand"]').click()
        expect(page.locator("#pipeline-title")).to_have_text("Pipeline page_hand")
        page.get_by_label("Conf").fill('{"from": "the page"}')
        page.get_by_role("button", name="Trigger run").click()
        expect(page.get_by_test_id("trigger-created")).to_contain_text("run-", timeout=15_000)
        (manual,) = runs_of(api, "page_hand")
        assert (manual["triggered_by"], manual["conf"]) == ("manual", {"from": "the page"})

        # Replay the asset run from its row: a new run opens with replay_of.
        wait_for(
            lambda: call(api, "GET", f"/runs/{run['run_id']}")["state"] == "success", what="the run's end"
        )
        expect(row.get_by_role("button", name="Replay")).to_be_visible(timeout=15_000)
        row.get_by_role("button", name="Replay").click()
        detail = page.get_by_test_id("run-detail")
        expect(detail.get_by_test_id("replay-of-link")).to_have_text(run["run_id"], timeout=15_000)
        assert any(r.get("replay_of") == run["run_id"] for r in runs_of(api, "page_etl"))
    finally:
        context.close()
    assert not problems, problems


def test_assetflow_ui_serves_the_page_through_its_proxy(
    runtime: LocalRuntime, api: ApiClient, browser: Any
) -> None:
    # `assetflow ui` without --env: the page on its own 127.0.0.1 port, its calls forwarded to the runtime's API.
    from playwright.sync_api import expect

    from assetflow_dev.ui_proxy import UiProxy

    with UiProxy(local_client(runtime.dev_config())) as proxy:
        context = browser.new_context(viewport={"width": 1440, "height": 1000})
        page = context.new_page()
        try:
            page.goto(proxy.url)
            expect(page.get_by_test_id("connection")).to_contain_text("Live", timeout=20_000)
            page.locator('[data-testid="graph-node"][data-kind="pipeline"][data-id="by_hand"]').click()
            expect(page.get_by_test_id("explain-blocked")).to_have_attribute(
                "data-blocked-by", "time", timeout=15_000
            )
            assert "token" not in page.url
        finally:
            context.close()


def test_the_event_operators_on_the_running_runtime(runtime: LocalRuntime, api: ApiClient) -> None:
    # where: a small order is recorded and listed, not queued; explain (API and CLI) names the pattern it missed
    small = call(
        api,
        "POST",
        "/assets/events",
        {"uri": "x-e2e://cond/orders", "extra": {"amount": 5, "tenant": "acme"}},
        201,
    )
    explained = wait_for(
        lambda: (doc := call(api, "GET", "/pipelines/big_orders/explain")).get("skipped") and doc,
        what="the small order skipped",
    )
    (skip,) = explained["skipped"]
    assert skip["event_id"] == small["id"]
    assert skip["missed"][0]["pattern"] == {"amount": [{"numeric": [">", 100]}]}
    assert explained["condition"]["recent_misses"] == [small["id"]]
    text = cli(runtime, "explain", "big_orders")
    assert text.returncode == 0, text.stderr
    assert f'{small["id"]}: missed {{"amount": [{{"numeric": [">", 100]}}]}}' in text.stdout
    assert runs_of(api, "big_orders") == []
    call(api, "POST", "/assets/events", {"uri": "x-e2e://cond/orders", "extra": {"amount": 500}}, 201)
    wait_for(lambda: runs_of(api, "big_orders"), what="a run for the big order")

    # key=: the two assets meet per tenant (the small order was acme's)
    call(
        api,
        "POST",
        "/assets/events",
        {"uri": "x-e2e://cond/payments", "extra": {"tenant": "acme"}, "version": "p1"},
        201,
    )
    (run,) = wait_for(lambda: runs_of(api, "per_tenant"), what="acme's run")
    assert run["partition_key"] == "acme"

    # skip_unchanged: the same version again makes no second run; the runs record the job's code_version
    (first,) = wait_for(lambda: runs_of(api, "once_per_version"), what="the first version's run")
    assert first["code_version"] == "2"
    call(api, "POST", "/assets/events", {"uri": "x-e2e://cond/payments", "extra": {}, "version": "p1"}, 201)
    skipped = wait_for(
        lambda: [
            s
            for s in call(api, "GET", "/pipelines/once_per_version/explain").get("skipped", [])
            if "skip_unchanged" in s["reason"]
        ],
        what="the repeated version skipped",
    )
    assert len(skipped) == 1 and len(runs_of(api, "once_per_version")) == 1
    nothing = cli(runtime, "backfill", "once_per_version", "--stale", "--dry-run")
    assert nothing.returncode == 0, nothing.stderr
    assert "nothing is stale: every successful run is of code_version 2" in nothing.stdout
