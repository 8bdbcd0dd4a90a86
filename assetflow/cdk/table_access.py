"""Which items of the one table each function may touch: actions by partition-key prefix (``dynamodb:LeadingKeys``).

The table's partitions say what they hold (see the store's modules): ``ASSET#<uri>`` (an asset's events, its
summary, its alias resolutions), ``ALIAS#<name>``, ``DEDUPE#<identity>`` (by source: ``sqs:``, ``kafka:``,
``api#``, ``outlet#``, ``quarantine#``), ``QUARANTINE``, ``PIPELINE#<id>`` (queue heads, the active-run count),
``PENDING#<pipeline>`` (runs made, not yet submitted), ``QUEUE#<pipeline>#<key>`` (entries, seen marks) and
``RUN#<id>``. Each function gets the actions it uses on the partitions it uses, and nothing on the others: an
ingest function writes its own asset's events and its own source's dedupe records, never a queue or a run, and
deletes nothing it could not already overwrite (its events' batched puts are BatchWriteItem, which IAM cannot
tell from deletes).

``TableAccess`` is plain data, checked against the handlers' real requests in
tests/reliability/test_least_privilege.py (every request of every function's flows must be allowed by its
profile); ``grant_table_access`` turns it into IAM statements.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the profiles are read by tests without the CDK
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import aws_iam as iam

READ_ACTIONS = ("dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query")
WRITE_ACTIONS = ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem")
#: Many puts or deletes in one request. IAM cannot tell its puts from its deletes, so it is granted apart, on
#: the partitions a function may both write and delete in: queue partitions.
BATCH_WRITE_ACTIONS = ("dynamodb:BatchWriteItem",)
DELETE_ACTIONS = ("dynamodb:DeleteItem",)
INDEX_ACTIONS = ("dynamodb:Query",)
KEY_READ = ("kms:Decrypt", "kms:DescribeKey")
KEY_WRITE = ("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey")


@dataclass(frozen=True)
class TableAccess:
    """A function's access to the table: ``StringLike`` patterns of the partition keys it reads, writes, deletes.

    ``indexes`` are the global secondary indexes it queries (reads only).
    """

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    deletes: tuple[str, ...] = ()
    indexes: tuple[str, ...] = field(default=())
    #: Partitions written (or deleted in) with BatchWriteItem.
    batch_writes: tuple[str, ...] = ()
    #: The read and write actions granted on those partitions (a function that only gets and puts gets no more).
    read_actions: tuple[str, ...] = READ_ACTIONS
    write_actions: tuple[str, ...] = WRITE_ACTIONS

    def allows(self, action: str, partition: str | None) -> bool:
        """Whether the profile allows ``action`` (``dynamodb:GetItem``...) on ``partition`` (None: an index)."""
        if partition is None:
            return action in INDEX_ACTIONS and bool(self.indexes)
        for actions, patterns in (
            (self.read_actions, self.reads),
            (self.write_actions, self.writes),
            (DELETE_ACTIONS, self.deletes),
            (BATCH_WRITE_ACTIONS, self.batch_writes),
        ):
            if action in actions and any(_like(partition, p) for p in patterns):
                return True
        return False

    def __or__(self, other: TableAccess) -> TableAccess:
        def union(a: Sequence[str], b: Sequence[str]) -> tuple[str, ...]:
            return tuple(dict.fromkeys([*a, *b]))

        return TableAccess(
            reads=union(self.reads, other.reads),
            writes=union(self.writes, other.writes),
            deletes=union(self.deletes, other.deletes),
            indexes=union(self.indexes, other.indexes),
            batch_writes=union(self.batch_writes, other.batch_writes),
            read_actions=union(self.read_actions, other.read_actions),
            write_actions=union(self.write_actions, other.write_actions),
        )


_CDK_TOKEN = re.compile(r"(\$\{Token\[[^\]]+\]\})")


def literal(value: str) -> str:
    """``value`` as a StringLike pattern matching only itself (IAM's ``${*}``, ``${?}`` and ``${$}``).

    CDK tokens in it (a queue ARN made at deployment) are kept as they are: they resolve to names without
    wildcards.
    """
    parts = _CDK_TOKEN.split(value)
    return "".join(
        part
        if _CDK_TOKEN.fullmatch(part)
        else part.replace("$", "${$}").replace("*", "${*}").replace("?", "${?}")
        for part in parts
    )


def _like(value: str, pattern: str) -> bool:
    """IAM's StringLike: ``*`` any run of characters, ``?`` one, ``${*}``/``${?}``/``${$}`` themselves."""
    parts = re.split(r"(\$\{[*?$]\}|\*|\?)", pattern)
    regex = "".join(
        ".*" if p == "*" else "." if p == "?" else re.escape(p[2]) if p.startswith("${") else re.escape(p)
        for p in parts
    )
    return re.fullmatch(regex, value, re.DOTALL) is not None


# ---- the profiles ------------------------------------------------------------------------------------------

#: Evaluating a pipeline's queues and submitting its runs (the evaluator, and everything that releases held
#: runs: run state, ticks, the sweep).
EVALUATE = TableAccess(
    reads=("PIPELINE#*", "PENDING#*", "QUEUE#*", "RUN#*"),
    writes=("PIPELINE#*", "PENDING#*", "QUEUE#*", "RUN#*"),
    # A batch=False run consumes its entry (and clearing a queue drops entries); a pending item goes once
    # its runs are submitted. Nothing under PIPELINE#: a held run's marker is retired by an update.
    deletes=("PENDING#*", "QUEUE#*"),
    indexes=("gsi3",),
)
#: Routing an event through its aliases, and announcing a new catalog once (its digest's marker, declared assets
#: and aliases): the evaluator.
ROUTE = TableAccess(
    reads=("ASSET#*", "CATALOG#*"),
    writes=("ASSET#*", "CATALOG#*", "ALIASMETA#*"),
)
#: Recording job states and emitting a successful run's outlets (run state, the sweep); an outlet event held
#: by a failed blocking check gets a marker that finds it by id (``HELD#<event id>``).
RUN_STATES = EVALUATE | TableAccess(
    reads=("ASSET#*", "DEDUPE#outlet#*"),
    writes=("ASSET#*", "ALIAS#*", "DEDUPE#outlet#*", "HELD#*"),
)
EVALUATOR = EVALUATE | ROUTE
RUN_STATE = RUN_STATES
#: Ticks and wake-ups evaluate queues; a deadline check also reads its asset's events (every shard) and records
#: a missed deadline once (``EXPECT#<uri>``).
TICK = EVALUATE | TableAccess(reads=("ASSET#*", "EVENTS#*"), writes=("EXPECT#*",))
RECONCILE = RUN_STATES
#: The operator API: every view (reads, and the runs and assets indexes), emitting an asset event (its API
#: dedupe record), clearing a queue, the run actions (trigger, cancel, replay) that go through queues and
#: runs, and releasing a held event. Deletes: queue entries and pending items.
API = TableAccess(
    reads=(
        *("ASSET#*", "ALIAS#*", "PIPELINE#*", "QUEUE#*", "RUN#*", "QUARANTINE", "DEDUPE#api#*"),
        # Health and explain read expected assets' events (every shard) and releases; a release finds its
        # held outlet event by its marker (HELD#<event id>), and records itself once.
        *("EVENTS#*", "EXPECT#*", "HELD#*"),
    ),
    # A triggered, replayed or re-queued run waits for submission on a pending item, deleted once it is
    # submitted.
    writes=("ASSET#*", "PIPELINE#*", "PENDING#*", "QUEUE#*", "RUN#*", "DEDUPE#api#*", "EXPECT#*"),
    deletes=("PENDING#*", "QUEUE#*"),
    indexes=("gsi1", "gsi2", "gsi3"),
    # Requeueing a cancelled run's events drops the queue's seen markers, 25 a request (and takes their ids out
    # of its seen sets, an update each).
    batch_writes=("QUEUE#*",),
)


def ingest(
    asset_uris: str | Sequence[str], dedupe_prefixes: Sequence[str], *, batched_puts: bool = False
) -> TableAccess:
    """A watcher's ingest function: its assets' events, its source's dedupe records, the quarantine; no delete.

    ``asset_uris`` are the assets the watcher feeds (one, or several when one source feeds several assets).
    ``dedupe_prefixes`` are the identities' prefixes of the watcher's source (``sqs:<queue ARN>:`` or
    ``kafka:``); the quarantine's dedupe records have the same identities after ``quarantine#``.
    ``batched_puts``: an SQS queue's watcher, whose first deliveries' events go out in BatchWriteItem.
    """
    uris = [asset_uris] if isinstance(asset_uris, str) else list(asset_uris)
    # Each asset's partition, and the write shards of a busy asset (``EVENTS#<n>#<uri>``).
    events = tuple(key for uri in uris for key in (f"ASSET#{literal(uri)}", f"EVENTS#*#{literal(uri)}"))
    dedupe = [f"DEDUPE#{literal(p)}*" for p in dedupe_prefixes]
    dedupe += [f"DEDUPE#quarantine#{literal(p)}*" for p in dedupe_prefixes]
    # Its source's watermarks: an SQS queue's one (``sqs:<ARN>``), a Kafka topic's per partition.
    watermarks = [
        f"WATERMARK#{literal(p)}*" if p == "kafka:" else f"WATERMARK#{literal(p.removesuffix(':'))}"
        for p in dedupe_prefixes
    ]
    return TableAccess(
        reads=(*events, *dedupe),
        writes=(*events, "QUARANTINE", *dedupe, *watermarks),
        # A batch's outcomes are transactions of puts and the count of its asset's summary (an update); a
        # redelivery reads its dedupe record (or event) back, and a batch which of its assets are new.
        read_actions=("dynamodb:GetItem", "dynamodb:BatchGetItem"),
        write_actions=("dynamodb:PutItem", "dynamodb:UpdateItem"),
        # An SQS queue's first deliveries: their events in batched puts. IAM cannot tell BatchWriteItem's
        # puts from its deletes; these partitions are the ones its PutItem may overwrite anyway.
        batch_writes=events if batched_puts else (),
    )


def job(inlet_uris: Sequence[str] | None) -> TableAccess:
    """The Spark jobs: queries of their declared inlets' events (every asset's with alias inlets: ``None``)."""
    assets = ("ASSET#*",) if inlet_uris is None else tuple(f"ASSET#{literal(u)}" for u in sorted(inlet_uris))
    return TableAccess(reads=assets)


def grant_table_access(
    table: dynamodb.ITable, grantee: iam.IGrantable, access: TableAccess, *, sid: str = "Table"
) -> None:
    """IAM statements for ``access``: item actions on the table, each under its ``dynamodb:LeadingKeys``.

    Queries of indexes are granted on the named indexes only (reads, whose partition keys name listings).
    """
    from aws_cdk import aws_iam as iam

    statements = [
        (f"{sid}Reads", access.read_actions, access.reads),
        (f"{sid}Writes", access.write_actions, access.writes),
        (f"{sid}Deletes", DELETE_ACTIONS, access.deletes),
        (f"{sid}BatchWrites", BATCH_WRITE_ACTIONS, access.batch_writes),
    ]
    for statement_id, actions, patterns in statements:
        if not patterns:
            continue
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid=statement_id,
                actions=list(actions),
                resources=[table.table_arn],
                conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": list(patterns)}},
            )
        )
    if access.indexes:
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid=f"{sid}Indexes",
                actions=list(INDEX_ACTIONS),
                resources=[f"{table.table_arn}/index/{index}" for index in access.indexes],
            )
        )
    if table.encryption_key is not None:
        writes = access.writes or access.deletes
        table.encryption_key.grant(grantee, *(KEY_WRITE if writes else KEY_READ))


__all__ = [
    "API",
    "EVALUATOR",
    "RECONCILE",
    "RUN_STATE",
    "TICK",
    "TableAccess",
    "grant_table_access",
    "ingest",
    "job",
    "literal",
]
