"""The operator web page (DESIGN §5, ``GET /ui/``) in headless Chromium, against the fake API of conftest.py."""

from __future__ import annotations

import re
import secrets
from typing import Any

import pytest

from tests.ui.conftest import CURATED, IOT, RAW, READINGS, TOKEN, FakeApi, event, run

sync_api = pytest.importorskip(
    "playwright.sync_api",
    reason="Playwright is not installed: pip install playwright==1.65.2",
)
expect = sync_api.expect

pytestmark = pytest.mark.slow

#: Longer than two refresh periods of the page (3 s each).
REFRESH_WAIT_MS = 10_000


def open_signed_in(page: Any, token: str = TOKEN) -> None:
    """Open the page from its ``ui`` link and wait until its first refresh succeeded."""
    page.goto(f"/ui/#token={token}")
    expect(page.get_by_test_id("connection")).to_contain_text("Live")


def node(page: Any, kind: str, key: str) -> Any:
    """One node of the graph."""
    return page.locator(f'[data-testid="graph-node"][data-kind="{kind}"][data-id="{key}"]')


def select_pipeline(page: Any, pipeline: str) -> None:
    """Click a pipeline in the graph and wait for its explain status."""
    node(page, "pipeline", pipeline).click()
    expect(page.locator("#pipeline-title")).to_have_text(f"Pipeline {pipeline}")
    expect(page.get_by_test_id("explain-updated")).to_be_visible()


def run_row(page: Any, run_id: str) -> Any:
    """A run's row in the list of all runs."""
    return page.get_by_test_id("runs").locator(f'[data-testid="run-row"][data-id="{run_id}"]')


def test_opens_signed_in_from_the_ui_link_and_the_token_leaves_the_address_bar(
    page: Any, fake_api: FakeApi
) -> None:
    open_signed_in(page)

    assert "token" not in page.url
    assert page.url.endswith("/ui/")
    assert page.evaluate("sessionStorage.getItem('assetflow.token')") == TOKEN
    with fake_api.lock:
        calls = list(fake_api.requests)
    paths = {c["path"] for c in calls}
    assert {"/catalog", "/assets", "/runs", "/quarantine", "/pipelines/ops_dashboard/explain"} <= paths
    # Same origin, at the root (never under /ui/), always with the bearer token.
    assert all(not c["path"].startswith("/ui") for c in calls)
    assert all(c["authorization"] == f"Bearer {TOKEN}" for c in calls), calls
    # The page followed `next` through every page of assets.
    assert [c["query"].get("next") for c in calls if c["path"] == "/assets"][:3] == [None, "4", "8"]

    page.reload()
    expect(page.get_by_test_id("connection")).to_contain_text("Live")
    expect(page.get_by_test_id("problem")).to_be_hidden()


def test_graph_shows_every_watcher_asset_alias_and_pipeline_of_the_catalog(
    page: Any, fake_api: FakeApi
) -> None:
    open_signed_in(page)
    catalog = fake_api.catalog

    for uri, asset in catalog["assets"].items():
        expect(node(page, "asset", uri)).to_contain_text(asset["name"])
    for pipeline in catalog["pipelines"]:
        expect(node(page, "pipeline", pipeline)).to_contain_text(pipeline)
    for watcher in catalog["watchers"]:
        expect(node(page, "watcher", watcher)).to_be_visible()
    for alias in catalog["aliases"]:
        expect(node(page, "alias", alias)).to_be_visible()
    nodes = (
        len(catalog["assets"])
        + len(catalog["pipelines"])
        + len(catalog["watchers"])
        + len(catalog["aliases"])
    )
    expect(page.get_by_test_id("graph-node")).to_have_count(nodes)

    edges = {
        (e.get_attribute("data-from"), e.get_attribute("data-to"))
        for e in page.get_by_test_id("graph-edge").all()
    }
    assert ("w:deliveries", f"a:{RAW}") in edges
    assert (f"a:{RAW}", "p:deliveries_etl") in edges
    assert ("p:deliveries_etl", f"a:{CURATED}") in edges
    assert ("p:partner_exports", "l:partner-exports") in edges
    assert ("l:partner-exports", "p:partner_feed_audit") in edges
    assert (f"a:{IOT}", "p:ops_dashboard") in edges
    # Watchers left of their assets, assets left of their consumers, pipelines left of their outlets.
    x = {k: node(page, *k).bounding_box()["x"] for k in [("watcher", "deliveries"), ("asset", RAW)]}
    x |= {k: node(page, *k).bounding_box()["x"] for k in [("pipeline", "deliveries_etl"), ("asset", CURATED)]}
    assert (
        x["watcher", "deliveries"] < x["asset", RAW] < x["pipeline", "deliveries_etl"] < x["asset", CURATED]
    )
    # Health and explain status show on the nodes.
    expect(node(page, "asset", "s3://assetflow-demo/iot/daily")).to_contain_text("late")
    expect(node(page, "pipeline", "daily_report")).to_contain_text("paused")


def test_selecting_a_pipeline_shows_its_explain_status(page: Any) -> None:
    open_signed_in(page)

    select_pipeline(page, "ops_dashboard")

    expect(page.get_by_test_id("explain-updated")).to_have_text("1 of 2 assets updated")
    blocked = page.get_by_test_id("explain-blocked")
    expect(blocked).to_have_text("Waiting for assets")
    expect(blocked).to_have_attribute("data-blocked-by", "assets")
    expect(page.get_by_test_id("explain-missing")).to_contain_text("iot_readings")
    tree = page.get_by_test_id("condition-tree")
    expect(tree.locator("[data-testid=condition-node]")).to_have_count(5)
    expect(tree.locator('[data-op="any"]')).to_have_attribute("data-value", "false")
    curated = tree.locator(f'[data-uri="{CURATED}"]')
    expect(curated).to_have_attribute("data-value", "true")
    expect(curated).to_contain_text("1 queued")
    expect(tree.locator(f'[data-uri="{IOT}"]')).to_have_attribute("data-value", "false")
    expect(node(page, "pipeline", "ops_dashboard")).to_have_attribute("aria-pressed", "true")

    # The list selects too, and every reason reads in words.
    reasons = {
        "sensor_check": "At its limit of active runs",
        "sensor_daily_rollup": "debounce",
        "daily_report": "Paused",
        "deliveries_etl": "Due: a run starts now",
    }
    for pipeline, words in reasons.items():
        page.get_by_test_id("pipelines").get_by_role("button", name=pipeline, exact=True).click()
        expect(page.locator("#pipeline-title")).to_have_text(f"Pipeline {pipeline}")
        expect(page.get_by_test_id("explain-blocked")).to_contain_text(words)


def test_runs_show_their_triggering_events_with_links_both_ways(page: Any, fake_api: FakeApi) -> None:
    open_signed_in(page)
    runs = page.get_by_test_id("runs")
    for run_id in fake_api.runs:
        expect(run_row(page, run_id)).to_be_visible()
    expect(run_row(page, "run-ops-0001")).to_contain_text("manual")
    expect(run_row(page, "run-etl-0002")).to_contain_text("replay of run-etl-0001")

    # A run → the events that triggered it → their asset.
    runs.get_by_role("button", name="run-etl-0001", exact=True).click()
    detail = page.get_by_test_id("run-detail")
    expect(detail.get_by_test_id("run-id")).to_have_text("run-etl-0001")
    triggering = detail.get_by_test_id("triggering-events")
    expect(triggering.locator("[data-testid=event-row]")).to_have_count(1)
    expect(triggering).to_contain_text("ev-raw-0001")
    expect(triggering).to_contain_text("D-1001")
    expect(detail.get_by_test_id("produced-events")).to_contain_text("ev-cur-0001")
    triggering.get_by_role("button", name="raw_deliveries").click()
    events = page.get_by_test_id("asset-events")
    expect(events.get_by_test_id("selected-asset")).to_have_text(RAW)
    expect(events.locator("[data-testid=event-row]")).to_have_count(2)
    with fake_api.lock:
        asked = [c["query"] for c in fake_api.requests if c["path"] == "/assets/events"]
    assert asked and asked[-1]["uri"] == RAW

    # An event → the run that produced it.
    page.get_by_test_id("assets").get_by_role("button", name="curated_deliveries").click()
    expect(events.get_by_test_id("selected-asset")).to_have_text(CURATED)
    events.get_by_test_id("event-run-link").click()
    expect(detail.get_by_test_id("run-id")).to_have_text("run-etl-0001")

    # A replay → the run it replays; a manual run shows its conf and no triggering events.
    run_row(page, "run-etl-0002").get_by_role("button", name="run-etl-0002").click()
    expect(detail.get_by_test_id("run-id")).to_have_text("run-etl-0002")
    detail.get_by_test_id("replay-of-link").click()
    expect(detail.get_by_test_id("run-id")).to_have_text("run-etl-0001")
    run_row(page, "run-ops-0001").get_by_role("button", name="run-ops-0001").click()
    expect(detail.get_by_test_id("run-conf")).to_contain_text('"full_refresh": true')
    expect(detail).to_contain_text("no asset event triggered this run")


def test_queue_and_quarantine_show_entries_and_reasons(page: Any) -> None:
    open_signed_in(page)

    select_pipeline(page, "sensor_daily_rollup")
    queue = page.get_by_test_id("queue")
    expect(queue.get_by_test_id("queue-updated")).to_have_text("1 of 1 assets updated")
    expect(queue.locator("[data-testid=queue-row]")).to_have_count(2)
    expect(queue.locator('[data-testid=queue-row][data-id="ev-sen-0003"]')).to_contain_text("2026-11-21")
    expect(queue).to_contain_text("sensor_readings")

    quarantine = page.get_by_test_id("quarantine")
    expect(quarantine.locator("[data-testid=quarantine-row]")).to_have_count(2)
    reasons = quarantine.get_by_test_id("quarantine-reason")
    expect(reasons.nth(0)).to_contain_text("not UTF-8")
    expect(reasons.nth(1)).to_contain_text("'files' is a required property")
    expect(quarantine).to_contain_text("deliveries")
    expect(quarantine).to_contain_text("sensor-readings")


def test_emit_event_form_posts_the_event_and_shows_it(page: Any, fake_api: FakeApi) -> None:
    open_signed_in(page)
    form = page.get_by_test_id("emit-form")

    form.get_by_label("Asset URI").fill(CURATED)
    form.get_by_label("Extra").fill('{"rows": 42, "source": "backfill"}')
    form.get_by_label("Partition key").fill("2026-11-21")
    form.get_by_role("button", name="Emit event").click()

    created = page.get_by_test_id("emit-created")
    expect(created).to_contain_text("Created event ev-api-0001")
    assert fake_api.posted("/assets/events") == [
        {"uri": CURATED, "extra": {"rows": 42, "source": "backfill"}, "partition_key": "2026-11-21"}
    ]
    # The new event appears in the asset's events.
    events = page.get_by_test_id("asset-events")
    expect(events.get_by_test_id("selected-asset")).to_have_text(CURATED)
    expect(events.locator('[data-testid=event-row][data-id="ev-api-0001"]')).to_contain_text("API")

    # Only the asset is needed; a bad extra never leaves the page; an API refusal reads clearly.
    form.get_by_label("Extra").fill("")
    form.get_by_label("Partition key").fill("")
    form.get_by_label("Asset URI").fill(READINGS)
    form.get_by_role("button", name="Emit event").click()
    expect(created).to_contain_text("ev-api-0002")
    assert fake_api.posted("/assets/events")[-1] == {"uri": READINGS}
    form.get_by_label("Extra").fill("[1, 2]")
    form.get_by_role("button", name="Emit event").click()
    expect(page.get_by_test_id("emit-result")).to_contain_text("Extra must be a JSON object")
    assert len(fake_api.posted("/assets/events")) == 2
    form.get_by_label("Extra").fill("")
    form.get_by_label("Asset URI").fill("s3://nowhere/at-all")
    form.get_by_role("button", name="Emit event").click()
    expect(page.get_by_test_id("emit-result")).to_contain_text(
        "404 not_found: no asset 's3://nowhere/at-all'"
    )


def test_trigger_cancel_replay_and_pause_send_the_right_posts(page: Any, fake_api: FakeApi) -> None:
    open_signed_in(page)
    select_pipeline(page, "ops_dashboard")

    # Trigger, with a conf and a partition key.
    page.get_by_label("Conf").fill('{"full_refresh": false}')
    page.get_by_role("button", name="Trigger run").click()
    expect(page.get_by_test_id("trigger-created")).to_contain_text("run-man-0001")
    assert fake_api.posted("/pipelines/ops_dashboard/runs") == [{"conf": {"full_refresh": False}}]
    expect(page.get_by_test_id("run-detail").get_by_test_id("run-id")).to_have_text("run-man-0001")
    expect(run_row(page, "run-man-0001")).to_contain_text("queued")

    # Cancel a running run.
    run_row(page, "run-chk-0002").get_by_role("button", name="Cancel").click()
    expect(page.get_by_test_id("notice")).to_contain_text("Run run-chk-0002 is cancelled")
    assert fake_api.posted("/runs/run-chk-0002/cancel") == [None]
    expect(run_row(page, "run-chk-0002").get_by_test_id("run-state")).to_have_text("cancelled")
    expect(run_row(page, "run-chk-0002").get_by_role("button", name="Cancel")).to_have_count(0)

    # Replay a finished run: the new run opens.
    run_row(page, "run-etl-0001").get_by_role("button", name="Replay").click()
    expect(page.get_by_test_id("notice")).to_contain_text("run run-rpl-0002")
    assert fake_api.posted("/runs/run-etl-0001/replay") == [None]
    detail = page.get_by_test_id("run-detail")
    expect(detail.get_by_test_id("run-id")).to_have_text("run-rpl-0002")
    expect(detail.get_by_test_id("replay-of-link")).to_have_text("run-etl-0001")
    expect(detail.get_by_test_id("triggering-events")).to_contain_text("ev-raw-0001")

    # Pause and unpause.
    page.get_by_role("button", name="Pause", exact=True).click()
    expect(page.get_by_test_id("explain-blocked")).to_contain_text("Paused")
    expect(page.get_by_role("button", name="Pause", exact=True)).to_be_disabled()
    page.get_by_role("button", name="Unpause", exact=True).click()
    expect(page.get_by_test_id("explain-blocked")).to_have_text("Waiting for assets")
    assert [p["path"] for p in fake_api.posts][-2:] == [
        "/pipelines/ops_dashboard/pause",
        "/pipelines/ops_dashboard/unpause",
    ]

    # An API refusal reads clearly.
    fake_api.fail_next_post = (409, "conflict", "run run-etl-0001 cannot be replayed now")
    run_row(page, "run-etl-0001").get_by_role("button", name="Replay").click()
    expect(page.get_by_test_id("notice")).to_contain_text(
        "Replay run run-etl-0001 failed: 409 conflict: run run-etl-0001 cannot be replayed now"
    )


def test_a_refused_token_shows_a_sign_in_problem_and_signing_in_recovers(
    page: Any, fake_api: FakeApi
) -> None:
    page.goto("/ui/#token=not-the-token")

    expect(page.get_by_test_id("connection")).to_have_text("Token refused")
    problem = page.get_by_test_id("problem")
    expect(problem).to_contain_text("Sign-in problem")
    expect(problem).to_contain_text("401")
    assert "token" not in page.url

    signin = page.get_by_test_id("signin")
    signin.get_by_label("Token").fill(TOKEN)
    signin.get_by_role("button", name="Sign in").click()
    expect(page.get_by_test_id("connection")).to_contain_text("Live")
    expect(problem).to_be_hidden()
    expect(signin).to_be_hidden()
    expect(node(page, "pipeline", "ops_dashboard")).to_be_visible()

    # The token is rotated under the page: it says so at the next refresh.
    fake_api.token = secrets.token_urlsafe(18)
    expect(page.get_by_test_id("connection")).to_have_text("Token refused", timeout=REFRESH_WAIT_MS)
    expect(node(page, "pipeline", "ops_dashboard")).to_be_visible()


def test_an_unreachable_api_is_shown_and_the_page_recovers(page: Any) -> None:
    # Given a page that refreshes every second (?refresh=SECONDS)
    page.goto(f"/ui/?refresh=1#token={TOKEN}")
    expect(page.get_by_test_id("connection")).to_contain_text("Live")

    def api_only(url: str) -> bool:
        return "/ui/" not in url

    page.route(api_only, lambda route: route.abort("connectionrefused"))
    expect(page.get_by_test_id("connection")).to_have_text("API unreachable", timeout=REFRESH_WAIT_MS)
    expect(page.get_by_test_id("problem")).to_contain_text("The API is unreachable")
    page.unroute(api_only)
    expect(page.get_by_test_id("connection")).to_contain_text("Live", timeout=REFRESH_WAIT_MS)
    expect(page.get_by_test_id("problem")).to_be_hidden()


def test_the_page_refreshes_by_itself_keeping_selection_and_input(page: Any, fake_api: FakeApi) -> None:
    open_signed_in(page)
    select_pipeline(page, "ops_dashboard")
    run_row(page, "run-etl-0001").get_by_role("button", name="run-etl-0001").click()
    extra = page.get_by_test_id("emit-form").get_by_label("Extra")
    extra.fill('{"half": "typed')
    extra.focus()

    # Given new data behind the API
    arrived = event(IOT, "ev-iot-0002", "2026-11-21T10:40:00.000000Z", {"checked": 3}, {"type": "watcher"})
    with fake_api.lock:
        fake_api.events[IOT].append(arrived)
        doc = fake_api.explains["ops_dashboard"]
        doc.update(due=True, blocked_by=None, updated=2, missing=[])
        doc["condition"]["value"] = doc["condition"]["children"][0]["value"] = True
        doc["condition"]["children"][0]["children"][1].update(value=True, queued=1)
        fake_api.quarantine.insert(
            0,
            {
                "at": "2026-11-21T10:41:00.000000Z",
                "watcher": "deliveries",
                "reason": "the body is not JSON: Expecting value at line 1",
                "body": "delivery D-1004",
                "facts": {},
                "identity": "sqs:deliveries:x4",
            },
        )
    fake_api.add_run(
        run("run-ops-0002", "ops_dashboard", "running", "2026-11-21T10:40:01.000000Z", "assets", [arrived])
    )

    # Then it appears without a reload
    expect(run_row(page, "run-ops-0002")).to_be_visible(timeout=REFRESH_WAIT_MS)
    expect(page.get_by_test_id("explain-updated")).to_have_text(
        "2 of 2 assets updated", timeout=REFRESH_WAIT_MS
    )
    expect(page.get_by_test_id("explain-blocked")).to_have_text("Due: a run starts now")
    expect(page.get_by_test_id("pipeline-runs").locator('[data-id="run-ops-0002"]')).to_be_visible()
    expect(page.get_by_test_id("quarantine").locator("[data-testid=quarantine-row]")).to_have_count(3)
    expect(
        page.get_by_test_id("assets").locator(f'[data-testid=asset-row][data-id="{IOT}"]')
    ).to_contain_text("2")

    # And the user's selection, input and focus survived
    expect(page.locator("#pipeline-title")).to_have_text("Pipeline ops_dashboard")
    expect(page.get_by_test_id("run-detail").get_by_test_id("run-id")).to_have_text("run-etl-0001")
    expect(extra).to_have_value('{"half": "typed')
    expect(extra).to_be_focused()
    assert re.search(r"refreshed \d", page.get_by_test_id("connection").inner_text())
