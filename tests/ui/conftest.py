"""A fake assetflow API for the web page's browser tests, and the headless Chromium that opens the page.

The fake serves the page's static files at ``/ui/`` (without a token, as a browser navigates there) and canned,
realistic JSON for every route the page calls, built from a real compiled catalog
(``fixtures/catalog.json``, the output of ``assetflow catalog --json``). Every API route checks the bearer
token and answers DESIGN §5's ``{"error", "detail"}`` on failure; POSTs change the fake's state as the real API
would and are recorded, so tests can assert what the page sent.
"""

from __future__ import annotations

import copy
import json
import os
import re
import secrets
import threading
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "assetflow_dev" / "ui" / "static"
CATALOG = Path(__file__).parent / "fixtures" / "catalog.json"
# Debian's `chromium` package; ASSETFLOW_CHROMIUM points elsewhere (another distribution's build).
CHROMIUM = Path(os.environ.get("ASSETFLOW_CHROMIUM", "/usr/bin/chromium"))
TOKEN = secrets.token_urlsafe(18)
PRINCIPAL = "arn:aws:iam::000000000000:user/assetflow-local"
# Without the background-networking flags Chromium's own connections are refused in bulk on a closed network.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}

RAW = "s3://assetflow-demo/landing/deliveries"
CURATED = "s3://assetflow-demo/curated/deliveries"
READINGS = "x-iot://sensors/readings"
IOT = "s3://assetflow-demo/iot/readings"
IOT_DAILY = "s3://assetflow-demo/iot/daily"
REFRESH = "x-ops://dashboard/refresh"
OPS = "s3://assetflow-demo/reports/ops_dashboard"
DAILY = "s3://assetflow-demo/reports/daily"
AUDIT = "s3://assetflow-demo/audit/partner_feeds"

SQS = {"type": "watcher", "watcher": "deliveries", "kind": "sqs"}
KAFKA = {"type": "watcher", "watcher": "sensor-readings", "kind": "kafka"}


def event(
    asset: str,
    event_id: str,
    timestamp: str,
    extra: dict[str, Any] | None = None,
    source: dict[str, Any] | None = None,
    partition_key: str | None = None,
) -> dict[str, Any]:
    """DESIGN §5's event shape."""
    return {
        "asset": asset,
        "id": event_id,
        "timestamp": timestamp,
        "extra": extra or {},
        "source": source or {},
        "partition_key": partition_key,
    }


def run(
    run_id: str,
    pipeline: str,
    state: str,
    created_at: str,
    triggered_by: str,
    events: Sequence[dict[str, Any]] = (),
    *,
    conf: dict[str, Any] | None = None,
    partition_key: str | None = None,
    replay_of: str | None = None,
) -> dict[str, Any]:
    """DESIGN §5's run shape with ``triggered_by``, ``conf`` and, for a replay, ``replay_of``."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for e in sorted(events, key=lambda e: (e["timestamp"], e["id"])):
        grouped.setdefault(e["asset"], []).append(e)
    doc = {
        "run_id": run_id,
        "pipeline": pipeline,
        "state": state,
        "created_at": created_at,
        "partition_key": partition_key,
        "job_run_id": f"00fjr{run_id.rsplit('-', 1)[-1]}{pipeline[:3]}" if state != "queued" else None,
        "triggering_asset_events": grouped,
        "scheduled_time": None,
        "triggered_by": triggered_by,
        "conf": conf,
    }
    if replay_of:
        doc["replay_of"] = replay_of
    return doc


def asset_node(uri: str, value: bool, queued: int) -> dict[str, Any]:
    """An explain condition leaf."""
    return {"op": "asset", "uri": uri, "value": value, "queued": queued}


def explain(
    pipeline: str,
    condition: dict[str, Any],
    *,
    blocked_by: str | None,
    updated: int,
    required: int,
    missing: Sequence[str] = (),
) -> dict[str, Any]:
    """DESIGN §5's explain shape."""
    return {
        "pipeline": pipeline,
        "due": blocked_by is None,
        "blocked_by": blocked_by,
        "missing": list(missing),
        "updated": updated,
        "required": required,
        "condition": condition,
    }


def queue_entry(pipeline: str, e: dict[str, Any], key: str | None = None) -> dict[str, Any]:
    """A queue list item."""
    return {"pipeline": pipeline, "queue_key": key, "aliases": [], "event": e}


class FakeApi:
    """The state behind the fake server; tests read ``posts`` and ``requests`` and change the data."""

    def __init__(self, catalog: dict[str, Any]) -> None:
        self.lock = threading.Lock()
        self.token = TOKEN
        self.catalog = catalog
        self.url = ""
        self.assets_page_size = 4  # small, so that the page has to follow ``next``
        self.posts: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.fail_next_post: tuple[int, str, str] | None = None
        self._serial = 0
        self._seed()

    # ---- canned data -----------------------------------------------------------------------------

    def _seed(self) -> None:
        raw1 = event(
            RAW,
            "ev-raw-0001",
            "2026-11-21T09:58:12.104233Z",
            {
                "payload": {
                    "delivery_id": "D-1001",
                    "supplier": "acme",
                    "files": ["s3://landing/acme/d1001.csv"],
                },
                "sqs": {"queue": "deliveries", "message_id": "5f0c6a9e-1d2b-4c55-9a57-0b6c1c1f0a01"},
            },
            SQS,
        )
        raw2 = event(
            RAW,
            "ev-raw-0002",
            "2026-11-21T10:20:40.551020Z",
            {
                "payload": {
                    "delivery_id": "D-1002",
                    "supplier": "globex",
                    "files": ["s3://landing/globex/d1002.csv"],
                },
                "sqs": {"queue": "deliveries", "message_id": "6a1d7baf-2e3c-4d66-8b68-1c7d2d201b12"},
            },
            SQS,
        )
        cur1 = event(
            CURATED,
            "ev-cur-0001",
            "2026-11-21T10:02:55.000120Z",
            {"rows": 1240, "files": 1},
            {"type": "run", "pipeline": "deliveries_etl", "run_id": "run-etl-0001"},
        )

        def reading(event_id: str, ts: str, sensor: str, temperature: float) -> dict[str, Any]:
            payload = {"sensor_id": sensor, "reading_time": ts, "temperature_c": temperature}
            facts = {"topic": "sensor-readings", "partition": 0, "offset": int(event_id[-4:])}
            return event(READINGS, event_id, ts, {"payload": payload, "kafka": facts}, KAFKA, "2026-11-21")

        sens1 = reading("ev-sen-0001", "2026-11-21T09:40:00.000000Z", "s-17", 21.5)
        sens2 = reading("ev-sen-0002", "2026-11-21T10:10:00.000000Z", "s-17", 22.0)
        sens3 = reading("ev-sen-0003", "2026-11-21T10:25:00.000000Z", "s-04", 31.2)
        iot1 = event(
            IOT,
            "ev-iot-0001",
            "2026-11-21T09:41:30.000000Z",
            {"checked": 1, "alerts": 0},
            {"type": "run", "pipeline": "sensor_check", "run_id": "run-chk-0001"},
        )
        self.events: dict[str, list[dict[str, Any]]] = {uri: [] for uri in self.catalog["assets"]}
        for e in (raw1, raw2, cur1, sens1, sens2, sens3, iot1):
            self.events[e["asset"]].append(e)
        self.created_at = {uri: "2026-11-20T08:00:00.000000Z" for uri in self.catalog["assets"]}
        self.health = {uri: "fresh" for uri in self.catalog["assets"]}
        self.health[RAW] = "quarantined_input"
        self.health[IOT_DAILY] = "late"
        self.health[OPS] = "check_failed"

        runs = [
            run("run-chk-0001", "sensor_check", "success", "2026-11-21T09:40:01.000000Z", "assets", [sens1]),
            run("run-etl-0001", "deliveries_etl", "success", "2026-11-21T09:58:13.000000Z", "assets", [raw1]),
            run("run-pex-0001", "partner_exports", "failed", "2026-11-21T10:02:56.000000Z", "assets", [cur1]),
            run("run-chk-0002", "sensor_check", "running", "2026-11-21T10:10:01.000000Z", "assets", [sens2]),
            run(
                "run-etl-0002",
                "deliveries_etl",
                "success",
                "2026-11-21T10:15:00.000000Z",
                "replay",
                [raw1],
                replay_of="run-etl-0001",
            ),
            run(
                "run-ops-0001",
                "ops_dashboard",
                "queued",
                "2026-11-21T10:18:00.000000Z",
                "manual",
                conf={"full_refresh": True},
            ),
        ]
        self.runs: dict[str, dict[str, Any]] = {r["run_id"]: r for r in runs}

        self.explains: dict[str, dict[str, Any]] = {
            "deliveries_etl": explain(
                "deliveries_etl", asset_node(RAW, True, 1), blocked_by=None, updated=1, required=1
            ),
            "sensor_check": explain(
                "sensor_check",
                asset_node(READINGS, True, 1),
                blocked_by="max_active_runs",
                updated=1,
                required=1,
            ),
            "ops_dashboard": explain(
                "ops_dashboard",
                {
                    "op": "any",
                    "value": False,
                    "children": [
                        {
                            "op": "all",
                            "value": False,
                            "children": [asset_node(CURATED, True, 1), asset_node(IOT, False, 0)],
                        },
                        asset_node(REFRESH, False, 0),
                    ],
                },
                blocked_by="assets",
                updated=1,
                required=2,
                missing=[IOT],
            ),
            "partner_exports": explain(
                "partner_exports",
                asset_node(CURATED, False, 0),
                blocked_by="assets",
                updated=0,
                required=1,
                missing=[CURATED],
            ),
            "partner_feed_audit": explain(
                "partner_feed_audit",
                {"op": "alias", "name": "partner-exports", "value": False, "queued": 0},
                blocked_by="assets",
                updated=0,
                required=1,
            ),
            "daily_report": explain(
                "daily_report", asset_node(OPS, False, 0), blocked_by="paused", updated=0, required=1
            ),
            "sensor_daily_rollup": explain(
                "sensor_daily_rollup",
                asset_node(READINGS, True, 2),
                blocked_by="debounce",
                updated=1,
                required=1,
            ),
        }
        self.paused = {"daily_report"}
        self.queues: dict[str, dict[str, Any]] = {
            "deliveries_etl": {"items": [queue_entry("deliveries_etl", raw2)], "updated": 1, "required": 1},
            "sensor_check": {"items": [queue_entry("sensor_check", sens3)], "updated": 1, "required": 1},
            "ops_dashboard": {"items": [queue_entry("ops_dashboard", cur1)], "updated": 1, "required": 2},
            "sensor_daily_rollup": {
                "items": [
                    queue_entry("sensor_daily_rollup", sens2, "2026-11-21"),
                    queue_entry("sensor_daily_rollup", sens3, "2026-11-21"),
                ],
                "updated": 1,
                "required": 1,
            },
        }
        self.quarantine: list[dict[str, Any]] = [
            {
                "at": "2026-11-21T10:06:02.318000Z",
                "watcher": "sensor-readings",
                "reason": "the record's value is not UTF-8 (invalid start byte at byte 0); the body is kept as base64",
                "body": "/w4AAQ==",
                "facts": {
                    "topic": "sensor-readings",
                    "partition": 0,
                    "offset": 42,
                    "body": {"encoding": "base64"},
                },
                "identity": "kafka:local:sensor-readings:0:42:1763719562318",
            },
            {
                "at": "2026-11-21T10:05:31.000000Z",
                "watcher": "deliveries",
                "reason": "the message does not match the watcher's schema: 'files' is a required property",
                "body": '{"delivery_id": "D-1003", "supplier": "acme"}',
                "facts": {"queue": "deliveries", "message_id": "7b2e8cc0-3f4d-4e77-9c79-2d8e3e312c23"},
                "identity": "sqs:deliveries:7b2e8cc0-3f4d-4e77-9c79-2d8e3e312c23",
            },
        ]

    def _next(self, prefix: str) -> tuple[str, str]:
        self._serial += 1
        return f"{prefix}-{self._serial:04d}", f"2026-11-21T12:{self._serial:02d}:00.000000Z"

    # ---- what tests change -----------------------------------------------------------------------

    def add_run(self, doc: dict[str, Any]) -> None:
        """Record a run as the scheduler would."""
        with self.lock:
            self.runs[doc["run_id"]] = doc

    def posted(self, path: str) -> list[Any]:
        """Bodies of the POSTs to ``path``, oldest first."""
        with self.lock:
            return [p["body"] for p in self.posts if p["path"] == path]

    # ---- the routes ------------------------------------------------------------------------------

    def answer(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        """The status and JSON document of one authorised API request."""
        path_known = False
        for verb, pattern, handler in self._routes():
            found = re.fullmatch(pattern, path)
            path_known = path_known or found is not None
            if found and verb == method:
                args = [urllib.parse.unquote(g) for g in found.groups()]
                with self.lock:
                    if method == "POST" and self.fail_next_post is not None:
                        status, code, detail = self.fail_next_post
                        self.fail_next_post = None
                        return status, {"error": code, "detail": detail}
                    return handler(*args, query=query, body=body)
        if path_known:
            return 405, {"error": "method_not_allowed", "detail": f"{method} {path} is not a route"}
        return 404, {"error": "not_found", "detail": f"no route {path}"}

    def _routes(self) -> list[tuple[str, str, Callable[..., tuple[int, Any]]]]:
        return [
            ("GET", r"/catalog", self._catalog),
            ("GET", r"/assets", self._assets),
            ("GET", r"/assets/events", self._events),
            ("POST", r"/assets/events", self._emit),
            ("GET", r"/pipelines/([^/]+)/explain", self._explain),
            ("GET", r"/pipelines/([^/]+)/queue", self._queue),
            ("GET", r"/pipelines/([^/]+)/runs", self._pipeline_runs),
            ("POST", r"/pipelines/([^/]+)/runs", self._trigger),
            ("POST", r"/pipelines/([^/]+)/(pause|unpause)", self._pause),
            ("GET", r"/runs", self._runs),
            ("GET", r"/runs/([^/]+)", self._run),
            ("POST", r"/runs/([^/]+)/cancel", self._cancel),
            ("POST", r"/runs/([^/]+)/replay", self._replay),
            ("GET", r"/quarantine", self._quarantine),
        ]

    @staticmethod
    def _page(items: list[Any], query: dict[str, str], size: int) -> dict[str, Any]:
        start = int(query.get("next") or 0)
        size = min(size, int(query.get("limit") or size))
        end = start + size
        return {"items": items[start:end], "next": str(end) if end < len(items) else None}

    def _pipeline_or_404(self, pipeline: str) -> tuple[int, Any] | None:
        if pipeline not in self.catalog["pipelines"]:
            return 404, {"error": "not_found", "detail": f"no pipeline {pipeline!r}"}
        return None

    def _catalog(self, **_: Any) -> tuple[int, Any]:
        return 200, self.catalog

    def _assets(self, *, query: dict[str, str], **_: Any) -> tuple[int, Any]:
        items = []
        for uri in sorted(self.catalog["assets"]):
            events = self.events[uri]
            items.append(
                {
                    "uri": uri,
                    "name": self.catalog["assets"][uri]["name"],
                    "created_at": self.created_at[uri],
                    "last_event_at": max((e["timestamp"] for e in events), default=None),
                    "event_count": len(events),
                    "health": self.health[uri],
                }
            )
        return 200, self._page(items, query, self.assets_page_size)

    def _events(self, *, query: dict[str, str], **_: Any) -> tuple[int, Any]:
        uri = query.get("uri")
        if not uri:
            return 400, {"error": "bad_request", "detail": "give the asset as the query parameter 'uri'"}
        newest = sorted(self.events.get(uri, []), key=lambda e: (e["timestamp"], e["id"]), reverse=True)
        return 200, self._page(newest, query, 100)

    def _emit(self, *, body: Any, **_: Any) -> tuple[int, Any]:
        if not isinstance(body, dict) or not isinstance(body.get("uri"), str):
            return 400, {"error": "bad_request", "detail": "the body needs a string 'uri'"}
        uri = body["uri"]
        if uri not in self.catalog["assets"]:
            return 404, {"error": "not_found", "detail": f"no asset {uri!r} in the catalog"}
        extra = body.get("extra")
        if extra is not None and not isinstance(extra, dict):
            return 400, {"error": "bad_request", "detail": "'extra' must be an object"}
        event_id, ts = self._next("ev-api")
        created = event(
            uri, event_id, ts, extra, {"type": "api", "principal": PRINCIPAL}, body.get("partition_key")
        )
        self.events[uri].append(created)
        return 201, created

    def _explain(self, pipeline: str, **_: Any) -> tuple[int, Any]:
        return self._pipeline_or_404(pipeline) or (200, self.explains[pipeline])

    def _queue(self, pipeline: str, **_: Any) -> tuple[int, Any]:
        doc = self.queues.get(pipeline, {"items": [], "updated": 0, "required": 1})
        return self._pipeline_or_404(pipeline) or (200, {**doc, "next": None})

    def _sorted_runs(self, pipeline: str | None = None) -> list[dict[str, Any]]:
        runs = [r for r in self.runs.values() if pipeline is None or r["pipeline"] == pipeline]
        return sorted(runs, key=lambda r: (r["created_at"], r["run_id"]), reverse=True)

    def _pipeline_runs(self, pipeline: str, *, query: dict[str, str], **_: Any) -> tuple[int, Any]:
        return self._pipeline_or_404(pipeline) or (200, self._page(self._sorted_runs(pipeline), query, 100))

    def _trigger(self, pipeline: str, *, body: Any, **_: Any) -> tuple[int, Any]:
        missing = self._pipeline_or_404(pipeline)
        if missing:
            return missing
        body = body or {}
        if not isinstance(body.get("conf", {}), dict | None):
            return 400, {"error": "bad_request", "detail": "'conf' must be an object"}
        run_id, ts = self._next("run-man")
        doc = run(
            run_id,
            pipeline,
            "queued",
            ts,
            "manual",
            conf=body.get("conf"),
            partition_key=body.get("partition_key"),
        )
        self.runs[run_id] = doc
        return 201, doc

    def _pause(self, pipeline: str, verb: str, **_: Any) -> tuple[int, Any]:
        missing = self._pipeline_or_404(pipeline)
        if missing:
            return missing
        doc = self.explains[pipeline]
        if verb == "pause":
            self.paused.add(pipeline)
            doc.update(due=False, blocked_by="paused")
        else:
            self.paused.discard(pipeline)
            doc.update(blocked_by="assets" if doc["missing"] else None, due=not doc["missing"])
        return 200, {"pipeline": pipeline, "paused": pipeline in self.paused}

    def _runs(self, *, query: dict[str, str], **_: Any) -> tuple[int, Any]:
        return 200, self._page(self._sorted_runs(), query, 100)

    def _run(self, run_id: str, **_: Any) -> tuple[int, Any]:
        if run_id not in self.runs:
            return 404, {"error": "not_found", "detail": f"no run {run_id!r}"}
        produced: dict[str, list[dict[str, Any]]] = {}
        for events in self.events.values():
            for e in events:
                if e["source"].get("run_id") == run_id:
                    produced.setdefault(e["asset"], []).append(e)
        return 200, {**self.runs[run_id], "produced_asset_events": produced}

    def _cancel(self, run_id: str, **_: Any) -> tuple[int, Any]:
        doc = self.runs.get(run_id)
        if doc is None:
            return 404, {"error": "not_found", "detail": f"no run {run_id!r}"}
        if doc["state"] not in ("queued", "running"):
            return 409, {"error": "conflict", "detail": f"run {run_id} is already {doc['state']}"}
        doc["state"] = "cancelled"
        return 200, doc

    def _replay(self, run_id: str, **_: Any) -> tuple[int, Any]:
        original = self.runs.get(run_id)
        if original is None:
            return 404, {"error": "not_found", "detail": f"no run {run_id!r}"}
        new_id, ts = self._next("run-rpl")
        events = [e for group in original["triggering_asset_events"].values() for e in group]
        doc = run(
            new_id,
            original["pipeline"],
            "queued",
            ts,
            "replay",
            events,
            conf=copy.deepcopy(original["conf"]),
            partition_key=original["partition_key"],
            replay_of=run_id,
        )
        self.runs[new_id] = doc
        return 201, doc

    def _quarantine(self, *, query: dict[str, str], **_: Any) -> tuple[int, Any]:
        return 200, self._page(self.quarantine, query, 100)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the test output quiet."""

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _send(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, doc: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(doc).encode(), "application/json", headers)

    def _serve(self, method: str) -> None:
        fake = self.server.fake
        target = urllib.parse.urlsplit(self.path)
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if target.path == "/ui":
            self._send(HTTPStatus.MOVED_PERMANENTLY, b"", "text/plain", {"Location": "/ui/"})
            return
        if target.path.startswith("/ui/"):
            self._static(target.path.removeprefix("/ui/") or "index.html")
            return
        query = dict(urllib.parse.parse_qsl(target.query, keep_blank_values=True))
        given = self.headers.get("authorization")
        with fake.lock:
            fake.requests.append(
                {"method": method, "path": target.path, "query": query, "authorization": given}
            )
        if given != f"Bearer {fake.token}":
            detail = (
                "send the token as 'Authorization: Bearer <token>'"
                if not given
                else "the bearer token is not this runtime's"
            )
            self._json(
                401,
                {"error": "unauthorized", "detail": detail},
                {"WWW-Authenticate": 'Bearer realm="assetflow-local"'},
            )
            return
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            self._json(400, {"error": "bad_request", "detail": "the body is not JSON"})
            return
        if method == "POST":
            with fake.lock:
                fake.posts.append({"path": target.path, "body": body})
        status, doc = fake.answer(method, target.path, query, body)
        self._json(status, doc)

    def _static(self, name: str) -> None:
        path = STATIC / name
        if "/" in name or not path.is_file() or path.suffix not in CONTENT_TYPES:
            self._json(404, {"error": "not_found", "detail": f"no file {name}"})
            return
        self._send(200, path.read_bytes(), CONTENT_TYPES[path.suffix])


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: FakeApi) -> None:
        self.fake = fake
        super().__init__(("127.0.0.1", 0), _Handler)


@pytest.fixture
def fake_api() -> Iterator[FakeApi]:
    """A running fake API with fresh canned data; its ``url`` is the origin the page is opened from."""
    fake = FakeApi(json.loads(CATALOG.read_text()))
    server = _Server(fake)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="fake-assetflow-api", daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Chromium (Debian's ``chromium`` package) driven by Playwright, for the whole session."""
    sync_api = pytest.importorskip(
        "playwright.sync_api",
        reason="Playwright is not installed: pip install playwright==1.65.2",
    )
    if not CHROMIUM.exists():
        pytest.skip(
            f"no Chromium at {CHROMIUM}: install Debian's package ('apt-get install -y chromium') "
            "or set ASSETFLOW_CHROMIUM to a Chromium binary"
        )
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any, fake_api: FakeApi) -> Iterator[Any]:
    """A fresh browser tab on the fake's origin; fails the test on any script error or CSP violation."""
    context = browser.new_context(base_url=fake_api.url, viewport={"width": 1440, "height": 1000})
    tab = context.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(f"uncaught: {error}"))
    tab.on(
        "console",
        lambda message: (
            problems.append(f"console: {message.text}")
            if message.type == "error" and "Content Security Policy" in message.text
            else None
        ),
    )
    try:
        yield tab
    finally:
        context.close()
    assert not problems, problems
