"""`assetflow demo`: the example pipelines end to end on the local runtime, messages in, Spark runs out."""

from __future__ import annotations

import importlib
import json
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.core.catalog import Catalog
from assetflow.core.conditions import AssetAlias
from assetflow.core.watchers import EventBridgePattern, KafkaTopic, S3ObjectCreated, SqsQueue
from assetflow.loader import find_project_root, load_catalog
from assetflow_dev.runtime import LocalRuntime, RuntimeOptions

#: The example watchers the demo feeds, and the asset an operator refreshes through the HTTP API.
DELIVERIES_WATCHER = "deliveries"
SENSORS_WATCHER = "sensor-readings"
REFRESH_ASSET = "x-ops://dashboard/refresh"
#: The inbox's watchers (pipelines/inbox.py): files put in S3, an order on EventBridge, clicks on Kinesis.
INBOX_FILES_WATCHER = "inbox-files"
SHOP_ORDERS_WATCHER = "shop-orders"
WEB_CLICKS_WATCHER = "web-clicks"
INBOX_FILES = 2
WEB_CLICKS = 3
DELIVERIES = 3
SENSOR_READINGS = 24
#: A delivery message that breaks the watcher's schema: it must be quarantined, never lost or retried.
BAD_DELIVERY = json.dumps({"delivery_id": "d-bad", "supplier": "Not Valid!"})
TERMINAL = frozenset({"success", "failed", "cancelled"})
#: A project's own demo: the messages to send and the runs to expect (``assetflow init`` writes one).
DEMO_FILE = "demo.json"


class DemoError(Exception):
    """The demo cannot run with these definitions."""


@dataclass(frozen=True)
class Expectations:
    """What a successful demo shows: runs per pipeline, assets updated, aliases resolved, quarantined."""

    min_runs: Mapping[str, int]
    exact_runs: Mapping[str, int]
    assets: tuple[str, ...]
    aliases: tuple[str, ...]
    quarantined: int

    @classmethod
    def for_catalog(cls, catalog: Catalog, *, jobs_run: bool = True) -> Expectations:
        """Every pipeline runs; one ETL run per delivery; every asset updated; every outlet alias resolved.

        Without jobs (``jobs_run=False``: the ``emr-api`` launcher) no job adds assets to aliases, so the
        pipelines scheduled on aliases, and what only they produce, are not expected.
        """
        for watcher in (DELIVERIES_WATCHER, SENSORS_WATCHER):
            if watcher not in catalog.watchers:
                raise DemoError(
                    f"the demo feeds the example watcher {watcher!r}, which these definitions lack; "
                    "run it with the repository's pipelines/ (the default)"
                )
        etl = [
            p.id
            for p in catalog.pipelines.values()
            if not p.batch
            and catalog.watchers[DELIVERIES_WATCHER][1] in {a.uri for a in p.condition.iter_assets()}
        ]
        aliases = sorted(
            {o.name for p in catalog.pipelines.values() for o in p.outlets if isinstance(o, AssetAlias)}
        )
        pipelines = list(catalog.pipelines.values())
        assets = set(catalog.assets)
        if not jobs_run:
            on_aliases = [p for p in pipelines if any(True for _ in p.condition.iter_aliases())]
            pipelines = [p for p in pipelines if p not in on_aliases]
            assets -= {o.uri for p in on_aliases for o in p.outlets if not isinstance(o, AssetAlias)}
            aliases = []
        return cls(
            min_runs=dict.fromkeys((p.id for p in pipelines), 1),
            exact_runs=dict.fromkeys(etl, DELIVERIES),
            assets=tuple(sorted(assets)),
            aliases=tuple(aliases),
            quarantined=1,
        )


@dataclass
class Snapshot:
    """What the store shows at one moment."""

    runs: list[dict[str, Any]]
    assets: dict[str, dict[str, Any]]
    aliases: dict[str, list[str]]
    quarantined: int
    elapsed: float

    @property
    def states(self) -> Counter[str]:
        """Runs by state."""
        return Counter(r["state"] for r in self.runs)

    def runs_of(self, pipeline: str) -> list[dict[str, Any]]:
        """One pipeline's runs."""
        return [r for r in self.runs if r["pipeline"] == pipeline]

    def summary(self) -> str:
        """One progress line."""
        events = sum(int(a.get("event_count", 0)) for a in self.assets.values())
        states = ", ".join(f"{n} {s}" for s, n in sorted(self.states.items())) or "none yet"
        return f"[{self.elapsed:5.0f} s] events {events} · runs: {states} · quarantined {self.quarantined}"


@dataclass
class Verdict:
    """Whether the demo showed everything it promises, and what is missing."""

    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No problem found."""
        return not self.problems


def judge(snapshot: Snapshot, expected: Expectations) -> Verdict:
    """Compare a snapshot with the expectations."""
    verdict = Verdict()
    for pipeline, minimum in expected.min_runs.items():
        succeeded = [r for r in snapshot.runs_of(pipeline) if r["state"] == "success"]
        if len(succeeded) < minimum:
            verdict.problems.append(f"{pipeline}: {len(succeeded)} successful run(s), expected {minimum}+")
    for pipeline, exact in expected.exact_runs.items():
        count = len(snapshot.runs_of(pipeline))
        if count != exact:
            verdict.problems.append(f"{pipeline}: {count} run(s), expected exactly {exact}")
    for run in snapshot.runs:
        if run["state"] in ("failed", "cancelled"):
            verdict.problems.append(f"run {run['run_id']} of {run['pipeline']} {run['state']}")
    for uri in expected.assets:
        if not snapshot.assets.get(uri, {}).get("event_count"):
            verdict.problems.append(f"asset {uri}: no event")
    for alias in expected.aliases:
        if not snapshot.aliases.get(alias):
            verdict.problems.append(f"alias {alias}: resolved to no asset")
    if snapshot.quarantined != expected.quarantined:
        verdict.problems.append(
            f"{snapshot.quarantined} quarantined message(s), expected {expected.quarantined}"
        )
    return verdict


def take_snapshot(store: DynamoDbStore, aliases: Sequence[str], began: float) -> Snapshot:
    """Read runs, assets, alias resolutions and the quarantine count from the store."""
    runs = _all(lambda token: store.list_runs(limit=200, token=token))
    assets = {a["uri"]: a for a in _all(lambda token: store.list_assets(limit=200, token=token))}
    quarantined = len(_all(lambda token: store.list_quarantine(limit=200, token=token)))
    return Snapshot(
        runs=runs,
        assets=assets,
        aliases={alias: store.alias_assets(alias) for alias in aliases},
        quarantined=quarantined,
        elapsed=time.monotonic() - began,
    )


def _all(read: Callable[[str | None], Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token = None
    while True:
        page = read(token)
        items += page.items
        token = page.next
        if not token:
            return items


class Progress:
    """Progress on a console: one line rewritten in place on a terminal, a line per change otherwise."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self._last = ""
        self._width = 0

    def note(self, line: str) -> None:
        """Print a line of its own (above the progress line on a terminal)."""
        self._clear()
        print(f"  {line}", file=self.out, flush=True)
        if self.tty and self._last:
            self._draw(self._last)

    def update(self, line: str) -> None:
        """Show the current state."""
        if self.tty:
            self._draw(line)
        elif line.split("]", 1)[-1] != self._last.split("]", 1)[-1]:
            print(line, file=self.out, flush=True)
        self._last = line

    def done(self) -> None:
        """End the progress line."""
        if self.tty and self._last:
            print(file=self.out, flush=True)
            self._width = 0

    def _draw(self, line: str) -> None:
        print("\r" + line.ljust(self._width), end="", file=self.out, flush=True)
        self._width = len(line)

    def _clear(self) -> None:
        if self.tty and self._width:
            print("\r" + " " * self._width + "\r", end="", file=self.out, flush=True)
            self._width = 0


def _project_module(root: Path, name: str) -> ModuleType:
    """Import a module of the project (its root on ``sys.path`` for the import only)."""
    sys.path.insert(0, str(root))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(root))


def send_messages(runtime: LocalRuntime) -> dict[str, int]:
    """Write the sample delivery files, send the SQS and Kafka messages, refresh the dashboard by the API."""
    sample_data: Any = _project_module(runtime.project_root, "spark_jobs.sample_data")  # lives with the jobs

    resources = runtime.resources
    if resources is None:
        raise DemoError("the runtime is not started")
    landing = sample_data.LANDING_URI
    bucket = "s3://" + landing.removeprefix("s3://").split("/", 1)[0]
    folder = Path(resources.path_map[bucket]) / landing.removeprefix(bucket + "/")
    bodies = sample_data.write_delivery_files(folder, uri_prefix=landing, deliveries=DELIVERIES)
    sqs = runtime.client("sqs")
    queue_url = resources.queues[DELIVERIES_WATCHER].url
    for body in [*bodies, BAD_DELIVERY]:
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)

    from kafka import KafkaProducer  # optional dependency: only the local runtime needs it

    topic = resources.topics[SENSORS_WATCHER].topic
    readings = sample_data.sensor_messages(count=SENSOR_READINGS)
    producer = KafkaProducer(bootstrap_servers=runtime.endpoints()["kafka"], acks="all", linger_ms=5)
    try:
        for body in readings:
            key = json.loads(body)["sensor_id"].encode()
            producer.send(topic, key=key, value=body.encode())
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=5)

    api = runtime.dev_config()["api"]
    request = urllib.request.Request(  # noqa: S310 - the runtime's own http://127.0.0.1 URL
        f"{api['url']}/assets/events",
        data=json.dumps({"uri": REFRESH_ASSET, "extra": {"requested_by": "assetflow demo"}}).encode(),
        headers={"Authorization": f"Bearer {api['token']}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        if response.status != 201:
            raise DemoError(f"POST /assets/events answered {response.status}")
    return {"sqs": len(bodies) + 1, "kafka": len(readings), "api": 1} | feed_inbox(runtime)


def feed_inbox(runtime: LocalRuntime) -> dict[str, int]:
    """Put files in the inbox bucket, an order on the default bus, clicks on the stream (when they are watched).

    Each file's upload ends with a ``_SUCCESS`` marker, as Spark and Hadoop writers leave one: the watcher's
    suffix keeps it out (no event, nothing quarantined).
    """
    if runtime.resources is None or runtime.catalog is None:
        raise DemoError("the runtime is not started")
    watchers = runtime.catalog.watchers
    sent = {"s3": 0, "eventbridge": 0, "kinesis": 0}
    if INBOX_FILES_WATCHER in watchers:
        source = watchers[INBOX_FILES_WATCHER][0].source
        bucket, prefix = getattr(source, "bucket", ""), getattr(source, "prefix", "")
        s3 = runtime.client("s3")
        for n in range(INBOX_FILES):
            body = "sku,quantity\n" + "".join(f"sku-{n}-{i},{i + 1}\n" for i in range(3))
            s3.put_object(Bucket=bucket, Key=f"{prefix}partner-{n}/orders.csv", Body=body.encode())
            s3.put_object(Bucket=bucket, Key=f"{prefix}partner-{n}/_SUCCESS", Body=b"")
            sent["s3"] += 1
    if SHOP_ORDERS_WATCHER in watchers:
        answer = runtime.client("events").put_events(
            Entries=[
                {
                    "Source": "assetflow.demo.shop",
                    "DetailType": "Order Placed",
                    "Detail": json.dumps({"order_id": "o-1001", "amount": 42.5}),
                }
            ]
        )
        if answer.get("FailedEntryCount"):
            raise DemoError(f"EventBridge refused the demo's order: {answer['Entries']}")
        sent["eventbridge"] += 1
    if WEB_CLICKS_WATCHER in watchers:
        stream = runtime.resources.streams[WEB_CLICKS_WATCHER].stream
        kinesis = runtime.client("kinesis")
        for n in range(WEB_CLICKS):
            click = {"page": f"/products/{n}", "session": "s-1"}
            kinesis.put_record(StreamName=stream, Data=json.dumps(click).encode(), PartitionKey="s-1")
            sent["kinesis"] += 1
    return sent


def wait_for_runs(
    runtime: LocalRuntime,
    expected: Expectations,
    progress: Progress,
    *,
    timeout: float,
    settle: float = 3.0,
    began: float,
) -> Snapshot:
    """Poll until every expectation holds and nothing is left to do (or the timeout); return the last view.

    "Nothing left" means: no run queued or running, no job in the launcher, every poller idle, for
    ``settle`` seconds in a row (a run's success can still start the next pipeline).
    """
    if runtime.resources is None:
        raise DemoError("the runtime is not started")
    store = DynamoDbStore(runtime.client("dynamodb"), runtime.resources.table)
    deadline = time.monotonic() + timeout
    quiet_since: float | None = None
    while True:
        snapshot = take_snapshot(store, expected.aliases, began)
        progress.update(snapshot.summary())
        unfinished = any(r["state"] not in TERMINAL for r in snapshot.runs)
        met = judge(snapshot, expected).ok
        if met and not unfinished and runtime.idle():
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since >= settle:
                return snapshot
        else:
            quiet_since = None
        if (
            any(r["state"] in ("failed", "cancelled") for r in snapshot.runs)
            and not unfinished
            and runtime.idle()
        ):
            return snapshot
        if time.monotonic() >= deadline:
            progress.note(f"timed out after {timeout:.0f} s")
            return snapshot
        time.sleep(1.0)


def print_views(runtime: LocalRuntime, snapshot: Snapshot, out: TextIO) -> None:
    """The operator views: assets, runs with their triggering events and outlet extras, quarantine."""
    from assetflow.usecases import views

    if runtime.resources is None:
        return
    store = DynamoDbStore(runtime.client("dynamodb"), runtime.resources.table)
    print("\nAssets", file=out)
    for uri, asset in sorted(snapshot.assets.items()):
        print(
            f"  {uri:<48} events {asset.get('event_count', 0):>3}  last {asset.get('last_event_at')}",
            file=out,
        )
    print("\nRuns (oldest first)", file=out)
    for run in sorted(snapshot.runs, key=lambda r: (r["created_at"], r["run_id"])):
        shown = views.show_run(store, run["run_id"], runtime.catalog)
        triggers = ", ".join(
            f"{uri} ({len(events)})" for uri, events in sorted(shown["triggering_asset_events"].items())
        )
        key = f" [{run['partition_key']}]" if run.get("partition_key") else ""
        print(f"  {run['pipeline']:<20} {run['state']:<8} {run['run_id']}{key}", file=out)
        print(f"      triggered by: {triggers or '(time)'}", file=out)
        for uri, events in shown["produced_asset_events"].items():
            for event in events:
                extra = json.dumps(event.get("extra") or {}, sort_keys=True)
                print(f"      produced {uri}: {extra[:150]}{'…' if len(extra) > 150 else ''}", file=out)
    quarantine = store.list_quarantine(limit=20).items
    print(f"\nQuarantined messages ({len(quarantine)})", file=out)
    for item in quarantine:
        print(f"  {item.get('watcher')}: {str(item.get('reason'))[:150]}", file=out)


@dataclass(frozen=True)
class ProjectDemo:
    """A project's ``demo.json``: the messages to send and the runs to expect.

    ``{"messages": [{"watcher", "body"}], "expect": {"runs": {id: n}, "quarantined": n}}``. Each message
    goes to its watcher's SQS queue or Kafka topic as it is (an object is sent as JSON); to an S3 watcher as
    an object, an EventBridge watcher as an event's detail, a Kinesis watcher as a record (``put_to_source``). The
    demo passes when each pipeline of ``expect.runs`` (default: every pipeline) has that many successful runs
    or more, no run failed, every asset it involves got an event, and exactly ``quarantined`` (default 0)
    messages were quarantined.
    """

    messages: tuple[tuple[str, str], ...]
    runs: Mapping[str, int]
    quarantined: int

    @classmethod
    def load(cls, path: Path, catalog: Catalog) -> ProjectDemo:
        """Read and check a demo file against the definitions.

        Raises:
            DemoError: the file is not valid JSON or names a watcher or pipeline the definitions lack.
        """
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise DemoError(f"{path}: {exc}") from exc
        if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list) or not doc["messages"]:
            raise DemoError(
                f'{path}: expected {{"messages": [{{"watcher": NAME, "body": ...}}, ...], "expect": ...}}'
            )
        messages = []
        for index, message in enumerate(doc["messages"]):
            watcher = message.get("watcher") if isinstance(message, dict) else None
            if watcher not in catalog.watchers or "body" not in message:
                known = ", ".join(sorted(catalog.watchers)) or "none"
                raise DemoError(f"{path}: message {index} needs a body and one of the watchers ({known})")
            body = message["body"]
            messages.append((str(watcher), body if isinstance(body, str) else json.dumps(body)))
        expect = doc.get("expect") or {}
        runs = expect.get("runs", dict.fromkeys(catalog.pipelines, 1))
        unknown = sorted(set(runs) - set(catalog.pipelines))
        if unknown:
            raise DemoError(f"{path}: expect.runs names pipelines the definitions lack: {', '.join(unknown)}")
        return cls(
            tuple(messages), {str(k): int(v) for k, v in runs.items()}, int(expect.get("quarantined", 0))
        )

    def expectations(self, catalog: Catalog) -> Expectations:
        """What the store must show afterwards."""
        sent = {catalog.watchers[w][1] for w, _ in self.messages}
        outlets = {
            o.uri
            for pid in self.runs
            for o in catalog.pipelines[pid].outlets
            if not isinstance(o, AssetAlias)
        }
        return Expectations(
            min_runs=dict(self.runs),
            exact_runs={},
            assets=tuple(sorted(sent | outlets)),
            aliases=(),
            quarantined=self.quarantined,
        )

    def send(self, runtime: LocalRuntime) -> dict[str, int]:
        """Send every message to its watcher's queue or topic."""
        if runtime.resources is None or runtime.catalog is None:
            raise DemoError("the runtime is not started")
        sent = Counter[str]()
        producer = None
        try:
            for watcher, body in self.messages:
                if isinstance(runtime.catalog.watchers[watcher][0].source, KafkaTopic):
                    from kafka import KafkaProducer  # only the local runtime needs it

                    producer = producer or KafkaProducer(
                        bootstrap_servers=runtime.endpoints()["kafka"], acks="all", linger_ms=5
                    )
                    producer.send(runtime.resources.topics[watcher].topic, value=body.encode())
                    sent["kafka"] += 1
                elif not isinstance(runtime.catalog.watchers[watcher][0].source, SqsQueue):
                    sent[put_to_source(runtime, watcher, body, sum(sent.values()))] += 1
                else:
                    url = runtime.resources.queues[watcher].url
                    runtime.client("sqs").send_message(QueueUrl=url, MessageBody=body)
                    sent["sqs"] += 1
            if producer is not None:
                producer.flush(timeout=30)
        finally:
            if producer is not None:
                producer.close(timeout=5)
        return dict(sent)


def put_to_source(runtime: LocalRuntime, watcher: str, body: str, n: int) -> str:
    """Send a demo message as its source expects it: an S3 object, an EventBridge event or a Kinesis record.

    The object's key is ``<prefix>demo-<n><suffix>``; the event's source and detail-type are the first ones its
    watcher's pattern lists, and the body is its detail. Returns the kind of source.

    Raises:
        DemoError: an EventBridge pattern names no plain source and detail-type to send.
    """
    if runtime.resources is None or runtime.catalog is None:
        raise DemoError("the runtime is not started")
    source = runtime.catalog.watchers[watcher][0].source
    if isinstance(source, S3ObjectCreated):
        key = f"{source.prefix}demo-{n}{source.suffix}"
        runtime.client("s3").put_object(Bucket=source.bucket, Key=key, Body=body.encode())
        return "s3"
    if isinstance(source, EventBridgePattern):
        pattern = source.event_pattern()
        names = [pattern.get(k, [None])[0] for k in ("source", "detail-type")]
        if not all(isinstance(name, str) for name in names):
            raise DemoError(f"watcher {watcher!r}: its pattern names no plain source and detail-type to send")
        entry = {"Source": names[0], "DetailType": names[1], "Detail": body, "EventBusName": source.bus}
        runtime.client("events").put_events(Entries=[entry])
        return "eventbridge"
    stream = runtime.resources.streams[watcher].stream
    runtime.client("kinesis").put_record(StreamName=stream, Data=body.encode(), PartitionKey=f"demo-{n}")
    return "kinesis"


def _scenario(options: RuntimeOptions) -> tuple[Catalog, ProjectDemo | None]:
    """The definitions and the project's demo file; None means the repository's built-in example demo.

    Raises:
        DemoError: there is neither a demo file nor the repository's example watchers.
    """
    catalog = load_catalog(options.pipelines)
    root = options.project_root or options.repo_root or find_project_root(options.pipelines)
    demo_file = root / DEMO_FILE
    if demo_file.is_file():
        return catalog, ProjectDemo.load(demo_file, catalog)
    if all(w in catalog.watchers for w in (DELIVERIES_WATCHER, SENSORS_WATCHER)):
        return catalog, None
    raise DemoError(
        f"no {DEMO_FILE} in the project root {root}: write one with the messages to send, e.g. "
        '{"messages": [{"watcher": "orders", "body": {...}}], "expect": {"runs": {"PIPELINE": 1}}} '
        "(`assetflow init` makes a project with one)"
    )


def check_demo(options: RuntimeOptions) -> None:
    """Refuse, before anything starts, definitions the demo cannot run.

    Raises:
        DemoError: no demo file and not the repository's examples, or a demo file that does not fit.
    """
    _scenario(options)


def run_demo(
    options: RuntimeOptions,
    *,
    out: TextIO = sys.stdout,
    timeout: float = 900.0,
) -> int:
    """Start the runtime, feed it the example messages, wait, print the views; 0 only if all went as expected.

    Everything the runtime started is stopped before returning, also on an exception or Ctrl-C.
    """
    began = time.monotonic()
    catalog, project_demo = _scenario(options)
    progress = Progress(out)
    print(
        f"assetflow demo: starting the local runtime (DynamoDB Local, moto, Tansu; {options.launcher} launcher)",
        file=out,
        flush=True,
    )
    runtime = LocalRuntime(options, observe=progress.note)
    with runtime:
        if runtime.catalog is None:
            raise DemoError("the runtime has no catalog")
        if project_demo is not None:
            expected = project_demo.expectations(catalog)
        else:
            expected = Expectations.for_catalog(runtime.catalog, jobs_run=options.launcher == "spark")
        config = runtime.dev_config()
        print(
            f"  ready in {runtime.startup_seconds:.1f} s · API {config['api']['url']} · details in "
            f"{runtime.dev_config_path}",
            file=out,
            flush=True,
        )
        if project_demo is not None:
            sent = project_demo.send(runtime)
            counts = ", ".join(
                f"{n} {kind.upper() if kind == 'sqs' else kind.capitalize()} messages"
                for kind, n in sent.items()
            )
            print(f"  sent {counts} from {DEMO_FILE}; waiting for the runs", file=out, flush=True)
        else:
            sent = send_messages(runtime)
            print(
                f"  sent {sent['sqs']} SQS messages (one malformed), {sent['kafka']} Kafka records, "
                f"{sent['api']} API event, {sent['s3']} S3 files, {sent['eventbridge']} EventBridge event, "
                f"{sent['kinesis']} Kinesis records; waiting for the runs",
                file=out,
                flush=True,
            )
        snapshot = wait_for_runs(runtime, expected, progress, timeout=timeout, began=began)
        progress.done()
        print_views(runtime, snapshot, out)
        verdict = judge(snapshot, expected)
    states = snapshot.states
    print(
        f"\n{len(snapshot.runs)} runs ({states.get('success', 0)} succeeded) in {time.monotonic() - began:.0f} s; "
        f"job logs in {options.work_dir / 'logs'}",
        file=out,
    )
    if verdict.ok:
        print("demo OK: every expected run succeeded and every expected asset was updated", file=out)
        return 0
    print("demo FAILED:", file=out)
    for problem in verdict.problems:
        print(f"  - {problem}", file=out)
    return 1
