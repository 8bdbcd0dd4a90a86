"""A load model of one assetflow environment on AWS: the events/s it sustains, what bounds it, what reaches 10,000.

Pure arithmetic, no AWS calls. For a pipeline shape — (a) ``single``: one asset, ``batch=False``, a run per
event; (b) ``and``: an ``a & b`` batch pipeline whose runs consume every queued event — and a deployment (stream
shards, Lambda's batch size and parallelization factor, write sharding of the hot keys), it computes every
ceiling an event meets on its way, as events/s, and the smallest is what the environment sustains:

- **hot keys**: DynamoDB serves at most 1,000 write units and 3,000 read units a second per partition, so per
  partition key and per item, however many partitions the table has. Today every event of an asset writes
  ``ASSET#<uri>`` (the event item, its ``COUNTED`` marker and three writes of the ``#META`` summary item: 8
  write units), every routed event writes ``QUEUE#<pipeline>#<key>`` (the ``SEEN`` marker, the entry) and the
  queue head item ``PIPELINE#<id>`` / ``QUEUE#<key>`` (one conditional transaction per event); and two global
  secondary index keys take a write from every event or run of the whole environment: ``gsi1`` ``ASSETS``
  (each ``#META`` change) and ``gsi2`` ``RUNS`` (each run state change). Write sharding (``N`` keys per hot key,
  an event's shard chosen by a hash of its id) divides a key's load by ``N``; reads that list a key's items
  then query ``N`` keys and merge (``shard_read_cost``).
- **the queue head** is the scheduling contract's serialization point (a conditional transaction on its
  version): one queue commits at most ``1 / (head read + transaction)`` transitions a second, whatever the
  write units, and each transition takes one event today (``events_per_transition``).
- **the evaluator**: the stream has one shard per table partition; Lambda reads each shard with up to
  ``parallelization_factor`` (1-10) concurrent batches, but keeps the records of one partition key in order, so
  all the events of one unsharded asset (one key, ``ASSET#<uri>``) go through one batch at a time (one
  "lane"). A lane handles ``batch_size / (overhead + batch_size x per-event time)`` events/s.
- **table and account quotas**: 40,000 write and read request units a second per on-demand table, 1,000
  concurrent Lambda executions, and for EMR Serverless ``StartJobRun`` at 1 a second (burst 25) and 16
  concurrent vCPUs per account by default.

The figures above are the branch point's ("today"). ``BRANCH``, ``BRANCH_SHAPES`` and ``BRANCH_COSTS`` model this
branch (issue 13): stream batches of 100 evaluated per queue, the asset summary counted once per ingest batch,
keys-only indexes (a run's entries written once, not on each state change), listener events off by default, the
run-state rule filtered, and the units the branch's cost benchmark counted. ``asset_shards_needed(rate)`` is the
number of event write shards one asset needs (``EnvironmentConfig.event_shards``): more than one past ~450
events/s; the unsharded summary item caps an asset at 5,000 events/s with ingest batches of 10 (50,000 with
batches of 100).

``plan(target)`` then turns the knobs (write shards, batch-aware evaluation, ``#META`` updated once per batch,
sub-queues, stream shards and parallelization factor, quota increases) until every bound clears the target,
and says what could not be reached.

Per-event DynamoDB units come from the cost benchmark (``results/cost.json``, counted on the emulators):
``single`` (one event + one run per message) 60.0 write units, 19.0 read units, 34 requests; ``and`` (one
event + 0.09 runs per message) 17.3, 7.1, 13.3. Solved for one event without a run and one run (with its
outlet event): 13.0 WRU, 5.9 RRU, 11.3 requests per event; 47.0, 13.1, 22.7 per run. The per-key units follow
the store's writes (``assetflow/adapters/dynamodb``) for items up to 1 KB (run items ~2 KB): a transactional
write costs two units per KB. The latencies on AWS (DynamoDB 5 ms, EventBridge 20 ms, S3 30 ms, StartJobRun
150 ms) and the EMR job's size (8 vCPU for 60 s) are assumptions, not documented figures: they are parameters.

Sources (read 2026-11-25): see ``SOURCES``.

Run: ``.venv/bin/python -m benchmarks.load_model [--quick] [--target 10000] [--results-dir DIR]``.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from benchmarks._common import parser, print_table, write_result

NAME = "load_model"
TARGET = 10_000.0

SOURCES: dict[str, str] = {
    "partition": "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput-scenarios.html "
    "(each partition: 1,000 write units/s, 3,000 read units/s); "
    "https://repost.aws/knowledge-center/on-demand-table-throttling-dynamodb (per partition, also on demand; "
    "new on-demand tables: 4,000 WRU / 12,000 RRU at once; 40,000 per table by default)",
    "gsi_partitions": "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/"
    "throttling-key-range-limit-exceeded-mitigation.html (partition limits apply to tables and GSIs)",
    "table_quota": "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html "
    "(on demand: 40,000 read and 40,000 write request units per table, adjustable)",
    "on_demand_scaling": "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/"
    "on-demand-capacity-mode.html (new table 4,000 writes/s, 12,000 reads/s; up to double the previous peak)",
    "transactions": "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html "
    "(up to 100 actions; two underlying writes per item: prepare and commit)",
    "stream_mapping": "https://docs.aws.amazon.com/lambda/latest/dg/services-ddb-params.html "
    "(BatchSize 100 default, 10,000 max; ParallelizationFactor 1 default, 10 max; batching window)",
    "stream_polling": "https://docs.aws.amazon.com/lambda/latest/dg/with-ddb.html "
    "(each shard polled 4 times a second; a batching window up to 5 minutes)",
    "shards": "https://aws.amazon.com/blogs/database/build-scalable-event-driven-architectures-with-amazon-"
    "dynamodb-and-aws-lambda/ (stream shards follow table partitions; Lambda per shard)",
    "lambda_quotas": "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html "
    "(1,000 concurrent executions per Region, adjustable to tens of thousands)",
    "lambda_scaling": "https://docs.aws.amazon.com/lambda/latest/dg/scaling-behavior.html "
    "(each function scales by 1,000 execution environments every 10 s)",
    "emr_serverless": "https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/endpoints-quotas.html "
    "(StartJobRun: 1 transaction/s, burst 25; max concurrent vCPUs per account 16 by default, adjustable; "
    "2,000 queued jobs)",
}


@dataclass(frozen=True)
class AwsLimits:
    """Documented limits (see ``SOURCES``); the adjustable ones are raised by ``plan``."""

    partition_write_units: float = 1_000.0
    partition_read_units: float = 3_000.0
    table_write_units: float = 40_000.0
    table_read_units: float = 40_000.0
    lambda_concurrency: float = 1_000.0
    max_parallelization_factor: int = 10
    max_batch_size: int = 10_000
    max_transaction_items: int = 100
    start_job_run_per_second: float = 1.0
    start_job_run_burst: int = 25
    emr_vcpus: float = 16.0


@dataclass(frozen=True)
class Latencies:
    """Assumed service latencies on AWS in ms (not documented figures), for the evaluator's time per event."""

    dynamodb_ms: float = 5.0
    transaction_ms: float = 10.0
    eventbridge_ms: float = 20.0
    s3_ms: float = 30.0
    start_job_run_ms: float = 150.0
    invocation_overhead_ms: float = 10.0
    #: The ingest function's time per event (batches of 10 SQS messages: one transaction each, plus overhead).
    ingest_ms_per_event: float = 11.0
    #: The run-state function's time per invocation (it is invoked for each EMR job state).
    run_state_ms: float = 50.0


@dataclass(frozen=True)
class UnitCosts:
    """DynamoDB units and requests for the whole environment (every function, table and indexes)."""

    event_write_units: float = 13.03
    event_read_units: float = 5.89
    event_requests: float = 11.30
    run_write_units: float = 46.99
    run_read_units: float = 13.12
    run_requests: float = 22.70


@dataclass(frozen=True)
class KeyLoad:
    """Units one event (or one run) puts on each hot key, before any sharding."""

    #: ``ASSET#<uri>``: the event item (2, in the ingest transaction), the ``COUNTED`` marker (2), and the
    #: ``#META`` item: a create attempt that fails once the asset exists (1), the count (2, transactional),
    #: ``last_event_at`` (1).
    asset_write: float = 8.0
    #: Of ``asset_write``, the single ``#META`` item's part: it stays on one key when the asset is sharded.
    meta_write: float = 4.0
    #: ``ASSET#<uri>`` reads per event (the alias lookup Query).
    asset_read: float = 1.0
    #: ``QUEUE#<pipeline>#<key>`` per routed event: the ``SEEN`` marker (2) and, in a batch queue, the entry (2).
    queue_write: float = 4.0
    #: ``QUEUE#...`` reads per event: the ``SEEN`` check (1) and, amortized, reading the consumed generation
    #: when a batch run is made (a 1 KB entry is 0.25 of a consistent read unit).
    queue_read: float = 1.25
    #: The queue head item, per transition (one transactional update).
    head_write: float = 2.0
    #: The head read (consistent) and the active-runs read, per transition.
    head_read: float = 2.0
    #: ``PIPELINE#<id>``/``#ACTIVE`` per run: +1 in the creating transaction, -1 when it ends (2 each).
    active_write_per_run: float = 4.0
    #: ``gsi1`` ``ASSETS``: every ``#META`` change of every asset (the count in a transaction: 2; the time: 1).
    assets_index_write: float = 3.0
    #: ``gsi2`` ``RUNS`` per run: created (4), submitted (4), RUNNING (2), ended (4): a ~2 KB item rewritten.
    runs_index_write_per_run: float = 14.0
    #: ``gsi1`` ``RUNS#<pipeline>`` per run: the same writes, per pipeline.
    pipeline_runs_index_write_per_run: float = 14.0


@dataclass(frozen=True)
class Shape:
    """A pipeline shape and what the evaluator does per event today."""

    name: str
    description: str
    #: A run per event (``batch=False``); else batch runs at ``batch_runs_per_second``.
    run_per_event: bool
    #: Assets the pipeline's events are spread over (evenly): 1 for ``single``, 2 for ``a & b``.
    assets: int
    keys: KeyLoad
    #: DynamoDB calls and EventBridge ``PutEvents`` the evaluator makes per event, one event at a time.
    evaluator_dynamodb_calls: float
    evaluator_eventbridge_calls: float = 2.0
    #: Batch runs a second (``and``): with ``max_active_runs=1`` one run per job duration at most.
    batch_runs_per_second: float = 1.0 / 60.0
    #: Run-state invocations per run (one per EMR job state: 5 today, 2 with the rule filtered).
    run_state_invocations: float = 5.0


SINGLE = Shape(
    "single",
    "one asset, batch=False: a run per event",
    run_per_event=True,
    assets=1,
    keys=KeyLoad(queue_write=2.0, queue_read=1.0),
    evaluator_dynamodb_calls=14.0,
)
AND = Shape(
    "and",
    "an a & b batch pipeline: events queue, a run consumes them all",
    run_per_event=False,
    assets=2,
    keys=KeyLoad(),
    evaluator_dynamodb_calls=8.0,
)
SHAPES: dict[str, Shape] = {SINGLE.name: SINGLE, AND.name: AND}


@dataclass(frozen=True)
class Deployment:
    """What can be configured or changed."""

    #: Table partitions = stream shards (a new on-demand table's 4,000 write units/s imply at least 4).
    stream_shards: int = 4
    parallelization_factor: int = 1
    batch_size: int = 25
    batching_window_s: float = 0.0
    #: Write shards per asset key (``ASSET#<uri>#<n>``, n = hash(event id) mod N); 1 = today.
    asset_shards: int = 1
    #: Sub-queues per pipeline queue (``QUEUE#<p>#<key>#<n>``, each with its own head); 1 = today.
    queue_shards: int = 1
    #: Shards of the global index keys (``ASSETS#<n>``, ``RUNS#<n>``, ``RUNS#<p>#<n>``); 1 = today.
    index_shards: int = 1
    #: Fold a batch's events of one queue into one transition (up to the 100-action transaction limit).
    batch_evaluation: bool = False
    #: Update the asset summary once per batch (``ADD event_count :n``) instead of once per event.
    meta_per_batch: bool = False
    #: The events one such update covers (0: the stream batch; this branch counts in the ingest batch).
    meta_batch: int = 0
    #: The EMR job (assumed): vCPUs it holds and seconds it runs.
    job_vcpus: float = 8.0
    job_seconds: float = 60.0


# ---- this branch (issue 13: batched evaluation and ingest) ------------------------------------------------

#: The deployment as this branch ships it: stream batches of 100, each evaluated per queue (one transaction
#: per group, up to 100 actions), the asset summary counted once per ingest batch (10 SQS messages).
BRANCH = Deployment(batch_size=100, batch_evaluation=True, meta_per_batch=True, meta_batch=10)
#: What the branch's store writes per event on each hot key (``assetflow/adapters/dynamodb``), items under
#: 1 KB, transactional writes two units: the event item in the ingest transaction (2) and the summary count
#: (2, once per ingest batch); no ``SEEN`` marker and no entry for an event a run takes alone at once (the run,
#: named by the event, stands for the marker); ``a & b`` queues an entry (2) and marks it in its second's seen
#: set, one set update (2) per transaction of ~10 events (0.2; the cost run counts 0.18); no active-run counter
#: without ``max_active_runs``; the indexes project keys only, so an entry is written when its keys are (a
#: summary's once, a run's once when created: one unit), never on a state change.
BRANCH_SINGLE_KEYS = KeyLoad(
    asset_write=4.0,
    meta_write=2.0,
    asset_read=0.01,
    queue_write=0.0,
    queue_read=1.0,
    head_read=2.0,
    active_write_per_run=0.0,
    assets_index_write=0.0,
    runs_index_write_per_run=1.0,
    pipeline_runs_index_write_per_run=1.0,
)
#: What the branch changes in both shapes besides their keys.
_BRANCH_CALLS: dict[str, float] = {
    "evaluator_eventbridge_calls": 0.0,  # listener events only for the types an environment subscribes to
    "run_state_invocations": 1.0,  # the rule delivers a job's end only (a run is running from its submission)
}
BRANCH_SINGLE = replace(SINGLE, keys=BRANCH_SINGLE_KEYS, **_BRANCH_CALLS)
BRANCH_AND = replace(
    AND,
    # Reads per event on the queue's key: its marker (1), its sets (shared by the events of a slice of time) and
    # the sets' read before they are written; the cost run counts 1.0 read unit an event more than with markers.
    keys=replace(BRANCH_SINGLE_KEYS, queue_write=2.2, queue_read=2.25),
    **_BRANCH_CALLS,
)
BRANCH_SHAPES: dict[str, Shape] = {BRANCH_SINGLE.name: BRANCH_SINGLE, BRANCH_AND.name: BRANCH_AND}
#: Per event and per run (with its outlet event), solved from this branch's cost benchmark
#: (``results/cost.json``: ``single`` 1 event + 1 run per message, ``and`` 1 event + 0.09 runs) by
#: ``unit_costs_from_cost_run``; a test keeps them equal to what the committed cost run solves to.
BRANCH_COSTS = UnitCosts(
    event_write_units=3.92,
    event_read_units=2.23,
    event_requests=0.56,
    run_write_units=7.98,
    run_read_units=0.01,
    run_requests=4.07,
)


def unit_costs_from_cost_run(result: Mapping[str, Any]) -> UnitCosts:
    """The units of one event and of one run, solved from a cost benchmark's two scenarios.

    Each scenario's message is one event and ``runs_per_message`` runs (with their outlet events): two
    equations, per counted quantity, in the event's and the run's share (``single``: 1 run a message). The
    units are the priced lines' medians over the cost run's repetitions; the requests, its operation counts.
    """
    scenarios = result["results"]["per_million_messages"]

    def per_message(name: str) -> tuple[float, dict[str, float]]:
        found = scenarios[name]
        lines = found["lines"]
        quantities = {
            "write_units": lines["DynamoDB writes"]["quantity_per_million"]["median"] / 1e6,
            "read_units": lines["DynamoDB reads"]["quantity_per_million"]["median"] / 1e6,
            "requests": sum(found["operations_per_message"]["dynamodb"].values()),
        }
        return float(found["runs_per_message"]), quantities

    (runs_a, a), (runs_b, b) = per_message("single"), per_message("and")
    run = {q: (a[q] - b[q]) / (runs_a - runs_b) for q in a}
    event = {q: a[q] - runs_a * run[q] for q in a}
    return UnitCosts(
        **{f"{share}_{q}": round(units[q], 2) for share, units in (("event", event), ("run", run)) for q in a}
    )


def asset_shards_needed(
    events_per_second: float,
    shape: Shape = BRANCH_SINGLE,
    deployment: Deployment = BRANCH,
    limits: AwsLimits | None = None,
) -> int | None:
    """The write shards one asset's events need at ``events_per_second`` (1: none), or None if no number does.

    The busiest key holds its share of the events' items and the summary item's counts, which sharding the
    events does not spread: its ceiling is ``1,000 / summary units per event`` however many shards.
    """
    limits = limits or AwsLimits()
    keys = shape.keys
    per = deployment.meta_batch or deployment.batch_size
    meta = keys.meta_write / per if deployment.meta_per_batch else keys.meta_write
    room = limits.partition_write_units / events_per_second - meta
    if room <= 0:
        return None
    return max(1, math.ceil((keys.asset_write - keys.meta_write) / room))


@dataclass(frozen=True)
class Bound:
    """One ceiling: the events/s it allows and why."""

    name: str
    events_per_second: float
    scope: str
    formula: str


@dataclass
class Result:
    """The bounds of one shape and deployment, the smallest of them, and the shape's unit costs."""

    shape: str
    deployment: Deployment
    limits: AwsLimits
    bounds: list[Bound] = field(default_factory=list)

    @property
    def binding(self) -> Bound:
        """The smallest bound: what the environment sustains and why."""
        return min(self.bounds, key=lambda b: b.events_per_second)

    @property
    def sustained(self) -> float:
        """Events/s the environment sustains."""
        return self.binding.events_per_second

    def to_json(self) -> dict[str, Any]:
        """Plain JSON."""
        return {
            "shape": self.shape,
            "sustained_events_per_second": self.sustained,
            "binding": self.binding.name,
            "deployment": asdict(self.deployment),
            "limits": asdict(self.limits),
            "bounds": [asdict(b) for b in sorted(self.bounds, key=lambda b: b.events_per_second)],
        }


# ---- the arithmetic ---------------------------------------------------------------------------------------


def events_per_transition(deployment: Deployment, limits: AwsLimits, shape: Shape) -> int:
    """Events one queue transition takes: 1 today; with batch evaluation, a batch within a transaction.

    Each event adds two actions to the transaction (the ``SEEN`` marker and the entry, or the run of a
    ``batch=False`` pipeline); the head and the active-runs counter take two more.
    """
    if not deployment.batch_evaluation:
        return 1
    room = (limits.max_transaction_items - 2) // 2
    return max(1, min(deployment.batch_size, room))


def hot_key_bound(write_units_per_event: float, shards: int, limits: AwsLimits) -> float:
    """Events/s one hot key takes when each event puts ``write_units_per_event`` on it, spread over ``shards``.

    A partition key lives in one partition, whatever the table's size: ``shards x 1,000 / units``.
    """
    if write_units_per_event <= 0:
        return math.inf
    return shards * limits.partition_write_units / write_units_per_event


def asset_key_write_units(keys: KeyLoad, deployment: Deployment) -> float:
    """Write units per event on the busiest key of a sharded asset: the one that also holds ``#META``."""
    per = deployment.meta_batch or deployment.batch_size
    meta = keys.meta_write / per if deployment.meta_per_batch else keys.meta_write
    return (keys.asset_write - keys.meta_write) / deployment.asset_shards + meta


def evaluator_seconds_per_batch(
    shape: Shape, deployment: Deployment, latencies: Latencies, runs_per_event: float, limits: AwsLimits
) -> float:
    """Seconds the evaluator spends on a full batch of ``batch_size`` events.

    One event at a time today: its DynamoDB calls, its ``PutEvents``, and for each run an S3 PUT (the run
    context), ``StartJobRun`` and the submitted mark. With batch evaluation: a few reads per batch, one
    transaction per ``events_per_transition`` events, ``PutEvents`` of 10 entries, and the same per-run work.
    """
    b = deployment.batch_size
    ms = latencies
    per_run = ms.s3_ms + ms.start_job_run_ms + ms.transaction_ms
    if deployment.batch_evaluation:
        transitions = math.ceil(b / events_per_transition(deployment, limits, shape))
        reads = 4.0  # head, active runs, SEEN markers, aliases: per batch and queue
        batch_ms = (
            ms.invocation_overhead_ms
            + reads * ms.dynamodb_ms
            + transitions * ms.transaction_ms
            + 2 * ms.transaction_ms  # the asset summary: once per batch
            + math.ceil(b * shape.evaluator_eventbridge_calls / 10) * ms.eventbridge_ms
            + b * runs_per_event * per_run
        )
    else:
        per_event = (
            shape.evaluator_dynamodb_calls * ms.dynamodb_ms
            + shape.evaluator_eventbridge_calls * ms.eventbridge_ms
            + runs_per_event * per_run
        )
        batch_ms = ms.invocation_overhead_ms + b * per_event
    return batch_ms / 1000.0


def lane_events_per_second(
    shape: Shape, deployment: Deployment, latencies: Latencies, runs_per_event: float, limits: AwsLimits
) -> float:
    """Events/s of one lane: one batch at a time from one shard (or one partition key of it)."""
    return deployment.batch_size / evaluator_seconds_per_batch(
        shape, deployment, latencies, runs_per_event, limits
    )


def lanes_for_one_key_group(shards_of_key: int, deployment: Deployment) -> int:
    """Concurrent batches the events of one (sharded) key can use.

    Lambda keeps one partition key's records in order, so an unsharded key is one lane whatever the
    parallelization factor; ``N`` keys spread over up to ``stream_shards x parallelization_factor`` lanes.
    """
    return max(1, min(shards_of_key, deployment.stream_shards * deployment.parallelization_factor))


def shard_read_cost(
    shards: int, page: int, item_kb: float = 1.0, *, consistent: bool = False
) -> dict[str, float]:
    """What a newest-first page of ``page`` items costs when the key is written in ``shards`` shards.

    Each shard is queried for a full page and the results merged (the newest ``page`` of ``shards x page``):
    ``shards`` queries, up to ``shards x page`` items read, read units ``shards x ceil(page x kb / 4)`` (halved
    for eventually consistent reads). Exact-key reads (an event by id, its ``COUNTED`` marker) stay one
    GetItem: the shard is the hash of the id.
    """
    per_query = math.ceil(page * item_kb / 4.0) * (1.0 if consistent else 0.5)
    return {
        "queries": float(shards),
        "items_read": float(shards * page),
        "read_units": shards * per_query,
        "read_units_unsharded": per_query,
        "factor": float(shards),
    }


def lambda_seconds_per_event(shape: Shape, runs_per_event: float, latencies: Latencies) -> float:
    """Lambda execution seconds per event outside the evaluator: ingest, and the run-state calls of its runs."""
    return (
        latencies.ingest_ms_per_event + runs_per_event * shape.run_state_invocations * latencies.run_state_ms
    ) / 1000.0


def runs_per_event(shape: Shape, events_per_second: float) -> float:
    """Runs per event: one for ``single``; for a batch pipeline its run rate over the event rate."""
    if shape.run_per_event:
        return 1.0
    return min(1.0, shape.batch_runs_per_second / max(events_per_second, 1e-9))


def bounds(
    shape: Shape,
    deployment: Deployment,
    limits: AwsLimits | None = None,
    latencies: Latencies | None = None,
    costs: UnitCosts | None = None,
    *,
    at_events_per_second: float = TARGET,
) -> Result:
    """Every ceiling of ``shape`` on ``deployment``, in events/s of the pipeline.

    ``at_events_per_second`` only matters for batch pipelines: their runs per event shrink as events grow
    (a fixed run rate), which changes the per-event units and the evaluator's time.
    """
    limits = limits or AwsLimits()
    latencies = latencies or Latencies()
    costs = costs or UnitCosts()
    d, k = deployment, shape.keys
    rpe = runs_per_event(shape, at_events_per_second)
    per_txn = events_per_transition(d, limits, shape)
    meta_factor = 1.0 / (d.meta_batch or d.batch_size) if d.meta_per_batch else 1.0
    found = Result(shape.name, d, limits)
    add = found.bounds.append

    # Hot keys of the pipeline's own assets (events spread over `assets`).
    asset_units = asset_key_write_units(k, d)
    add(
        Bound(
            "asset key writes (ASSET#<uri>, busiest shard with #META)",
            shape.assets * hot_key_bound(asset_units, 1, limits),
            "per asset",
            f"{shape.assets} asset(s) x 1,000 WCU / {asset_units:.2f} WCU per event",
        )
    )
    asset_reads = k.asset_read / d.batch_size if d.batch_evaluation else k.asset_read
    add(
        Bound(
            "asset key reads (alias lookup on ASSET#<uri>)",
            shape.assets * limits.partition_read_units / asset_reads,
            "per asset",
            f"{shape.assets} x 3,000 RCU / {asset_reads:.3g} RCU per event",
        )
    )
    add(
        Bound(
            "queue entries (QUEUE#<pipeline>#<key>)",
            hot_key_bound(k.queue_write, d.queue_shards, limits),
            "per queue",
            f"{d.queue_shards} sub-queue(s) x 1,000 WCU / {k.queue_write} WCU per event",
        )
    )
    add(
        Bound(
            "queue reads (SEEN checks, the consumed generation)",
            d.queue_shards * limits.partition_read_units / k.queue_read,
            "per queue",
            f"{d.queue_shards} x 3,000 RCU / {k.queue_read} RCU per event",
        )
    )
    pipeline_units = k.head_write / per_txn + k.active_write_per_run * rpe
    add(
        Bound(
            "queue head + active runs (PIPELINE#<id>)",
            hot_key_bound(pipeline_units, d.queue_shards, limits),
            "per queue",
            f"{d.queue_shards} x 1,000 WCU / ({k.head_write} / {per_txn} events per transition "
            f"+ {k.active_write_per_run} x {rpe:.3g} runs per event)",
        )
    )
    add(
        Bound(
            "queue head reads (head and active runs, consistent)",
            d.queue_shards * per_txn * limits.partition_read_units / k.head_read,
            "per queue",
            f"{d.queue_shards} x {per_txn} x 3,000 RCU / {k.head_read} RCU per transition",
        )
    )
    commit_s = (latencies.dynamodb_ms + latencies.transaction_ms) / 1000.0
    add(
        Bound(
            "queue head serialization (read, then conditional transaction)",
            d.queue_shards * per_txn / commit_s,
            "per queue",
            f"{d.queue_shards} x {per_txn} events per transition / "
            f"{latencies.dynamodb_ms + latencies.transaction_ms:.0f} ms per commit",
        )
    )
    # Global index keys: every asset's and every pipeline's traffic, so a bound on the whole environment.
    assets_index_units = k.assets_index_write * meta_factor + k.assets_index_write * rpe  # + outlet events
    add(
        Bound(
            "gsi1 ASSETS (every #META change of every asset)",
            hot_key_bound(assets_index_units, d.index_shards, limits),
            "environment",
            f"{d.index_shards} x 1,000 WCU / {assets_index_units:.3g} WCU per event",
        )
    )
    if rpe > 0:
        add(
            Bound(
                "gsi2 RUNS (every run change of every pipeline)",
                hot_key_bound(k.runs_index_write_per_run * rpe, d.index_shards, limits),
                "environment",
                f"{d.index_shards} x 1,000 WCU / ({k.runs_index_write_per_run} x {rpe:.3g} runs per event)",
            )
        )
        add(
            Bound(
                "gsi1 RUNS#<pipeline>",
                hot_key_bound(k.pipeline_runs_index_write_per_run * rpe, d.index_shards, limits),
                "per pipeline",
                f"{d.index_shards} x 1,000 WCU / ({k.pipeline_runs_index_write_per_run} x {rpe:.3g})",
            )
        )
    # The evaluator: lanes for the pipeline's (sharded) asset keys, and for the whole stream.
    lane = lane_events_per_second(shape, d, latencies, rpe, limits)
    lanes = shape.assets * lanes_for_one_key_group(d.asset_shards, d)
    add(
        Bound(
            "evaluator lanes for the pipeline's assets (per-key order)",
            lanes * lane,
            "per pipeline",
            f"{lanes} lane(s) x {lane:.3g} events/s (batch {d.batch_size}, "
            f"{evaluator_seconds_per_batch(shape, d, latencies, rpe, limits) * 1000:.0f} ms per batch)",
        )
    )
    stream_lanes = d.stream_shards * d.parallelization_factor
    add(
        Bound(
            "evaluator, whole stream (shards x parallelization factor)",
            stream_lanes * lane,
            "environment",
            f"{d.stream_shards} shards x P {d.parallelization_factor} x {lane:.3g} events/s",
        )
    )
    # The table and the account.
    write_units = costs.event_write_units + rpe * costs.run_write_units
    read_units = costs.event_read_units + rpe * costs.run_read_units
    add(
        Bound(
            "table write quota (on demand)",
            limits.table_write_units / write_units,
            "environment",
            f"{limits.table_write_units:,.0f} WRU / {write_units:.3g} WRU per event",
        )
    )
    add(
        Bound(
            "table read quota (on demand)",
            limits.table_read_units / read_units,
            "environment",
            f"{limits.table_read_units:,.0f} RRU / {read_units:.3g} RRU per event",
        )
    )
    add(
        Bound(
            "table partitions (even spread)",
            d.stream_shards * limits.partition_write_units / write_units,
            "environment",
            f"{d.stream_shards} partitions x 1,000 WCU / {write_units:.3g} WRU per event",
        )
    )
    lambda_seconds = lambda_seconds_per_event(shape, rpe, latencies)
    room = max(0.0, limits.lambda_concurrency - stream_lanes)
    add(
        Bound(
            "Lambda concurrency (ingest + run state; the evaluator holds shards x P)",
            room / lambda_seconds,
            "account",
            f"({limits.lambda_concurrency:,.0f} - {stream_lanes}) / {lambda_seconds * 1000:.3g} ms per event",
        )
    )
    # EMR Serverless: runs.
    if shape.run_per_event:
        add(
            Bound(
                "EMR Serverless StartJobRun rate",
                limits.start_job_run_per_second,
                "account",
                f"{limits.start_job_run_per_second:g} StartJobRun/s (burst {limits.start_job_run_burst}), 1 per event",
            )
        )
        add(
            Bound(
                "EMR Serverless concurrent vCPUs",
                limits.emr_vcpus / (d.job_vcpus * d.job_seconds),
                "account",
                f"{limits.emr_vcpus:,.0f} vCPUs / ({d.job_vcpus:g} vCPUs x {d.job_seconds:g} s per run)",
            )
        )
    else:
        runs_ok = shape.batch_runs_per_second <= limits.start_job_run_per_second and (
            shape.batch_runs_per_second * d.job_vcpus * d.job_seconds <= limits.emr_vcpus
        )
        add(
            Bound(
                "EMR Serverless (batch runs, independent of the event rate)",
                math.inf if runs_ok else 0.0,
                "account",
                f"{shape.batch_runs_per_second:.3g} runs/s x {d.job_vcpus:g} vCPUs x {d.job_seconds:g} s "
                f"vs {limits.emr_vcpus:,.0f} vCPUs and {limits.start_job_run_per_second:g} StartJobRun/s",
            )
        )
    return found


# ---- reaching a target ------------------------------------------------------------------------------------


def _with(deployment: Deployment, attribute: str, value: int) -> Deployment:
    changes: dict[str, Any] = {attribute: value}
    return replace(deployment, **changes)


def _smallest(start: int, top: int, good: Any) -> int:
    """The smallest n in [start, top] with good(n), else top."""
    n = start
    while n < top and not good(n):
        n = n * 2 if n * 2 <= top else top
    if not good(n):
        return top
    low = max(start, n // 2)
    while low < n:  # binary search down between the last bad and the first good
        mid = (low + n) // 2
        if good(mid):
            n = mid
        else:
            low = mid + 1
    return n


def plan(
    shape: Shape,
    target: float = TARGET,
    start: Deployment | None = None,
    limits: AwsLimits | None = None,
    latencies: Latencies | None = None,
    costs: UnitCosts | None = None,
) -> dict[str, Any]:
    """The changes that bring every bound of ``shape`` to ``target`` events/s, and what stays short.

    In order: batch-aware evaluation and the asset summary once per batch (no sharding lifts a single item's
    ceiling), asset write shards, sub-queues, index shards, stream shards with the parallelization factor at
    its maximum, then the adjustable quotas (table units, Lambda concurrency). EMR Serverless limits are not
    raised: what they allow is reported.
    """
    limits = limits or AwsLimits()
    latencies = latencies or Latencies()
    costs = costs or UnitCosts()
    d = start or Deployment()
    steps: list[str] = []

    def score(deployment: Deployment, lim: AwsLimits, names: Sequence[str]) -> float:
        found = bounds(shape, deployment, lim, latencies, costs, at_events_per_second=target)
        return min(b.events_per_second for b in found.bounds if b.name.startswith(tuple(names)))

    if not d.batch_evaluation or not d.meta_per_batch:
        d = replace(d, batch_evaluation=True, meta_per_batch=True, batch_size=max(d.batch_size, 100))
        steps.append(
            "evaluate a stream batch per queue: fold its events into one transition (up to "
            f"{events_per_transition(d, limits, shape)}), one asset-summary update per batch and asset, "
            f"PutEvents 10 entries at a time; batch size {d.batch_size}"
        )
    per_asset = target / shape.assets
    if d.meta_batch:
        # The summary item is not sharded: it takes one count per ingest batch, so a hot asset's ceiling is
        # 1,000 / (summary units / ingest batch). Bigger ingest batches (the mapping's batch size, with a
        # batching window) lift it; aim for at most 64 event shards.
        def few_shards(n: int) -> bool:
            found = asset_shards_needed(per_asset, shape, replace(d, meta_batch=n), limits)
            return found is not None and found <= 64

        if not few_shards(d.meta_batch):
            n = _smallest(d.meta_batch, 10_000, few_shards)
            d = replace(d, meta_batch=n)
            steps.append(
                f"ingest batches of {n} messages (the SQS mapping's batch size with a batching window, or the "
                "Kafka mapping's): the asset summary counts once per batch"
            )
    for attribute, names, label in (
        ("asset_shards", ["asset key writes"], "write shards per asset key (ASSET#<uri>#<n>)"),
        (
            "queue_shards",
            ["queue entries", "queue reads", "queue head"],
            "sub-queues per pipeline queue (entries, SEEN markers and heads; a run consumes them all)",
        ),
        ("index_shards", ["gsi"], "shards of the global index keys (ASSETS#<n>, RUNS#<n>)"),
    ):
        if score(d, limits, names) < target:
            n = _smallest(
                getattr(d, attribute),
                4096,
                lambda n, a=attribute, x=names, base=d: score(_with(base, a, n), limits, x) >= target,
            )
            d = _with(d, attribute, n)
            steps.append(f"{label}: {n}")
    if score(d, limits, ["table partitions"]) < target:
        n = _smallest(
            d.stream_shards,
            1_000_000,
            lambda n, base=d: score(replace(base, stream_shards=n), limits, ["table partitions"]) >= target,
        )
        d = replace(d, stream_shards=n)
        steps.append(f"{n} table partitions (= stream shards): pre-warm the table to this write rate")
    if score(d, limits, ["evaluator"]) < target:
        d = replace(d, parallelization_factor=limits.max_parallelization_factor)
        shards = _smallest(
            d.stream_shards,
            100_000,
            lambda n: score(replace(d, stream_shards=n), limits, ["evaluator, whole"]) >= target,
        )
        d = replace(d, stream_shards=shards)
        if score(d, limits, ["evaluator lanes"]) < target:
            n = _smallest(
                d.asset_shards,
                100_000,
                lambda n: score(replace(d, asset_shards=n), limits, ["evaluator lanes"]) >= target,
            )
            d = replace(d, asset_shards=n)
        steps.append(
            f"parallelization factor {d.parallelization_factor}, {d.stream_shards} stream shards (= table "
            f"partitions: pre-warm the table), {d.asset_shards} asset write shards for the evaluator's lanes"
        )
    final = bounds(shape, d, limits, latencies, costs, at_events_per_second=target)
    write_units = next(b for b in final.bounds if b.name.startswith("table write"))
    needed_wru = target * limits.table_write_units / write_units.events_per_second
    needed_rru = (
        target
        * limits.table_read_units
        / next(b for b in final.bounds if b.name.startswith("table read")).events_per_second
    )
    new_limits = replace(
        limits,
        table_write_units=max(limits.table_write_units, math.ceil(needed_wru)),
        table_read_units=max(limits.table_read_units, math.ceil(needed_rru)),
    )
    if new_limits != limits:
        steps.append(
            f"raise the table quotas to {new_limits.table_write_units:,} WRU/s and "
            f"{new_limits.table_read_units:,} RRU/s (Service Quotas); the table needs "
            f"{math.ceil(needed_wru / limits.partition_write_units):,} partitions' worth of writes"
        )
    stream_lanes = d.stream_shards * d.parallelization_factor
    rpe = runs_per_event(shape, target)
    needed = math.ceil(stream_lanes + target * lambda_seconds_per_event(shape, rpe, latencies))
    if needed > limits.lambda_concurrency:
        new_limits = replace(new_limits, lambda_concurrency=float(needed))
        steps.append(
            f"raise Lambda concurrency to {needed:,} ({stream_lanes:,} held by the evaluator's lanes)"
        )
    final = bounds(shape, d, new_limits, latencies, costs, at_events_per_second=target)
    short = [asdict(b) for b in final.bounds if b.events_per_second < target]
    return {
        "shape": shape.name,
        "target_events_per_second": target,
        "steps": steps,
        "deployment": asdict(d),
        "limits": asdict(new_limits),
        "sustained_events_per_second": final.sustained,
        "binding": final.binding.name,
        "reached": not short,
        "still_short": short,
        "read_fan_out": {
            "asset events page of 50 (events list, API)": shard_read_cost(d.asset_shards, 50),
            "queue listing / run creation": shard_read_cost(d.queue_shards, 100, consistent=True),
        },
    }


# ---- the script -------------------------------------------------------------------------------------------


def _rate(value: float) -> str:
    if math.isinf(value):
        return "unbounded"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def report(shape: Shape, deployment: Deployment, title: str) -> Result:
    """Print the bounds of ``shape`` on ``deployment``, smallest first."""
    found = bounds(shape, deployment)
    print_table(
        f"{title}: {shape.name} ({shape.description}) sustains {_rate(found.sustained)} events/s",
        ["bound", "events/s", "scope", "how"],
        [
            [b.name, _rate(b.events_per_second), b.scope, b.formula]
            for b in sorted(found.bounds, key=lambda b: b.events_per_second)
        ],
    )
    return found


def sweeps() -> dict[str, Any]:
    """How the hot-asset and evaluator bounds move with the knobs (the full run's sensitivity tables)."""
    base = Deployment()
    hot_asset = {
        str(n): {
            "per_event_meta": bounds(SINGLE, replace(base, asset_shards=n)).bounds[0].events_per_second,
            "meta_per_batch": bounds(SINGLE, replace(base, asset_shards=n, meta_per_batch=True))
            .bounds[0]
            .events_per_second,
        }
        for n in (1, 2, 4, 8, 16, 32, 64, 128)
    }
    table_partitions = {
        str(s): bounds(SINGLE, replace(base, stream_shards=s)).bounds[0].events_per_second
        for s in (1, 4, 64, 1024)
    }
    parallelization = {}
    for p in range(1, 11):
        found = bounds(
            AND, replace(base, parallelization_factor=p, batch_evaluation=True, meta_per_batch=True)
        )
        by_name = {b.name: b.events_per_second for b in found.bounds}
        parallelization[str(p)] = {
            "whole_stream": by_name["evaluator, whole stream (shards x parallelization factor)"],
            "one_unsharded_asset_pair": by_name["evaluator lanes for the pipeline's assets (per-key order)"],
        }
    return {
        "hot_asset_by_shards": hot_asset,
        "hot_asset_by_table_partitions": table_partitions,
        "evaluator_by_parallelization_factor": parallelization,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Print the model's tables and write its JSON."""
    started = time.perf_counter()
    arguments = parser(__doc__.splitlines()[0], default_runs=1, quick_runs=1)
    arguments.add_argument(
        "--target", type=float, default=TARGET, help="events/s to plan for (default 10,000)"
    )
    args = arguments.parse_args(argv)
    today = Deployment()
    prod = replace(today, parallelization_factor=2)
    results: dict[str, Any] = {"today": {}, "prod": {}, "plans": {}}
    for shape in (SINGLE, AND):
        results["today"][shape.name] = report(shape, today, "Today (dev: P 1)").to_json()
        results["prod"][shape.name] = bounds(shape, prod).to_json()
        planned = plan(shape, args.target)
        results["plans"][shape.name] = planned
        print(f"\nTo reach {args.target:,.0f} events/s ({shape.name}):")
        for step in planned["steps"]:
            print(f"  - {step}")
        for what, cost in planned["read_fan_out"].items():
            if cost["factor"] > 1:
                print(
                    f"  - reads: {what}: {cost['queries']:.0f} queries and up to {cost['items_read']:,.0f} items "
                    f"({cost['read_units']:g} RRU instead of {cost['read_units_unsharded']:g})"
                )
        print(
            f"  => sustains {_rate(planned['sustained_events_per_second'])} events/s, bound by "
            f"{planned['binding']}{'' if planned['reached'] else ' (target NOT reached)'}"
        )
    # This branch (issue 13): batched evaluation and ingest, keys-only indexes, measured unit costs.
    results["branch"], results["branch_plans"] = {}, {}
    for shape in BRANCH_SHAPES.values():
        found = bounds(shape, BRANCH, costs=BRANCH_COSTS)
        results["branch"][shape.name] = found.to_json()
        print_table(
            f"This branch: {shape.name} sustains {_rate(found.sustained)} events/s (batch {BRANCH.batch_size})",
            ["bound", "events/s", "scope", "how"],
            [
                [b.name, _rate(b.events_per_second), b.scope, b.formula]
                for b in sorted(found.bounds, key=lambda b: b.events_per_second)[:6]
            ],
        )
        planned = plan(shape, args.target, start=BRANCH, costs=BRANCH_COSTS)
        results["branch_plans"][shape.name] = planned
        print(f"\nFrom this branch to {args.target:,.0f} events/s ({shape.name}):")
        for step in planned["steps"]:
            print(f"  - {step}")
        print(
            f"  => sustains {_rate(planned['sustained_events_per_second'])} events/s, bound by "
            f"{planned['binding']}{'' if planned['reached'] else ' (target NOT reached)'}"
        )
    rates = (250, 450, 500, 1_000, 2_000, 3_000, 4_000, 5_000, 10_000)
    results["hot_asset_shards"] = {
        str(r): {
            "ingest_batch_10": asset_shards_needed(r),
            "ingest_batch_100": asset_shards_needed(r, deployment=replace(BRANCH, meta_batch=100)),
        }
        for r in rates
    }
    print_table(
        "Write shards one asset needs (this branch; None: the unsharded summary item caps it)",
        ["events/s on one asset", "ingest batches of 10", "ingest batches of 100"],
        [
            [r, str(v["ingest_batch_10"]), str(v["ingest_batch_100"])]
            for r, v in results["hot_asset_shards"].items()
        ],
    )
    if not args.quick:
        results["sweeps"] = sweeps()
        hot = results["sweeps"]["hot_asset_by_shards"]
        print_table(
            "One hot asset (single) by asset write shards: events/s on its busiest key",
            ["shards", "#META per event", "#META per batch of 25"],
            [[n, _rate(v["per_event_meta"]), _rate(v["meta_per_batch"])] for n, v in hot.items()],
        )
        print_table(
            "The same unsharded asset by table partitions (the key stays on one partition)",
            ["partitions", "events/s"],
            [[s, _rate(v)] for s, v in results["sweeps"]["hot_asset_by_table_partitions"].items()],
        )
        print_table(
            "Evaluator (and, batch evaluation) by parallelization factor, 4 shards",
            ["P", "whole stream", "one unsharded a & b pair"],
            [
                [p, _rate(v["whole_stream"]), _rate(v["one_unsharded_asset_pair"])]
                for p, v in results["sweeps"]["evaluator_by_parallelization_factor"].items()
            ],
        )
    results["sources"] = SOURCES
    write_result(
        NAME,
        results,
        results_dir=args.results_dir,
        quick=args.quick,
        parameters={
            "target": args.target,
            "limits": asdict(AwsLimits()),
            "latencies_assumed": asdict(Latencies()),
            "unit_costs": asdict(UnitCosts()),
            "shapes": {s.name: asdict(s) for s in SHAPES.values()},
            "branch_deployment": asdict(BRANCH),
            "branch_unit_costs": asdict(BRANCH_COSTS),
            "branch_shapes": {s.name: asdict(s) for s in BRANCH_SHAPES.values()},
        },
        notes=[
            "Pure arithmetic over documented AWS limits (see sources) and the units the cost benchmark counted; "
            "latencies and the EMR job's size are assumptions (parameters).",
        ],
        started=started,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
