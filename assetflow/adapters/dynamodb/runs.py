"""The runs aggregate: run items, their states, job run ids and the way back from a job run to its run."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from typing import Any

from assetflow.adapters.dynamodb.table import (
    DynamoDbTable,
    active_key,
    condition_failed,
    failed_item,
    num_attr,
    str_attr,
)
from assetflow.core.errors import AlreadySubmittedError, AssetflowError, ConflictError, NotFoundError
from assetflow.core.events import Run, RunState, format_timestamp, previous_states
from assetflow.ports import Page

#: Submitted runs still queued or running are listed on gsi3 under ``ACTIVE#<shard>`` (a key only while
#: they are), spread over this many partitions so that no index partition takes every submission's write.
ACTIVE_SHARDS = 16


def active_partition(run_id: str) -> str:
    """The gsi3 partition that lists a submitted, still active run (for the reconciliation sweep)."""
    shard = int(hashlib.sha256(run_id.encode()).hexdigest()[:8], 16) % ACTIVE_SHARDS
    return f"ACTIVE#{shard:02d}"


def pending_partition(pipeline: str) -> str:
    """The partition listing a pipeline's runs made but not yet submitted, by the moment they were made."""
    return f"PENDING#{pipeline}"


def _pending_key(pipeline: str, created: str) -> dict[str, Any]:
    return {"pk": str_attr(pending_partition(pipeline)), "sk": str_attr(created)}


def pending_add(table: str, pipeline: str, created: str, run_ids: Collection[str]) -> dict[str, Any]:
    """The write, in the transaction that makes runs or admits them, that lists them as waiting for submission.

    One item per pipeline and creation time (``created``, formatted; a transition's runs share it), its run ids
    in a string set: ``ADD`` merges, so two transitions made at the same microsecond keep each other's runs. The
    submitter takes runs off once their job run ids are recorded (``forget_pending``); the retry sweep reads
    what is left. One small item a transaction costs less than giving each run an index entry to move.
    """
    return {
        "Update": {
            "TableName": table,
            "Key": _pending_key(pipeline, created),
            "UpdateExpression": "ADD #r :ids",
            "ExpressionAttributeNames": {"#r": "runs"},
            "ExpressionAttributeValues": {":ids": {"SS": sorted(run_ids)}},
        }
    }


def _by_moment(runs: Sequence[Run]) -> dict[tuple[str, str], set[str]]:
    """Run ids by (pipeline, formatted creation time): the pending item that lists them."""
    found: dict[tuple[str, str], set[str]] = {}
    for run in runs:
        found.setdefault((run.pipeline, format_timestamp(run.created_at)), set()).add(run.run_id)
    return found


def pending_adds(table: str, runs: Sequence[Run]) -> list[dict[str, Any]]:
    """``pending_add`` for each pipeline and creation time among ``runs``."""
    made = _by_moment(runs)
    return [pending_add(table, pipeline, created, ids) for (pipeline, created), ids in sorted(made.items())]


def run_put(table: str, run: Run, trigger: Mapping[str, Any], *, counted: bool) -> dict[str, Any]:
    """The conditional put that creates a run (part of the transition that makes it, with ``pending_adds``).

    ``trigger`` says where its triggering events are: a batch run's stay in their queue generation
    (``{"queue", "prefix"}``), other runs reference their events' items (``{"events": [[pk, sk], ...]}``).
    ``counted``: the run counts in its pipeline's active-run counter (a pipeline with ``max_active_runs``), so
    its end must take it off again.
    """
    created = format_timestamp(run.created_at)
    doc = run.to_json()
    doc.pop("triggering_asset_events")
    doc.pop("state")
    item: dict[str, Any] = {
        "pk": str_attr(f"RUN#{run.run_id}"),
        "sk": str_attr("#RUN"),
        "run": str_attr(json.dumps(doc, sort_keys=True, separators=(",", ":"))),
        "state": str_attr(run.state.value),
        "pipeline": str_attr(run.pipeline),
        "trigger": str_attr(json.dumps(trigger, sort_keys=True, separators=(",", ":"))),
        "counted": {"BOOL": counted},
        # Beside the run's JSON: an item without it is a run made before token schemes (scheme 1).
        "token_scheme": num_attr(run.outlet_token_scheme),
        # No gsi3 key until its job run id is recorded: until then it waits on its PENDING# item.
        "gsi1pk": str_attr(f"RUNS#{run.pipeline}"),
        "gsi1sk": str_attr(f"{created}#{run.run_id}"),
        "gsi2pk": str_attr("RUNS"),
        "gsi2sk": str_attr(f"{created}#{run.run_id}"),
    }
    return {"TableName": table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}


#: Runs' job run ids recorded at once (independent conditional updates).
UPDATE_WORKERS = 8
_POOL_LOCK = threading.Lock()

#: A state change that names its job moves only that job's run (or a run with no job run id yet).
_JOB_CONDITION = " AND (attribute_not_exists(job_run_id) OR job_run_id = :j)"


def run_key(run_id: str) -> dict[str, Any]:
    """A run's item key."""
    return {"pk": str_attr(f"RUN#{run_id}"), "sk": str_attr("#RUN")}


class DynamoDbRunStore(DynamoDbTable):
    """Runs under ``RUN#<id>`` (listed by gsi1/gsi2, waiting for submission or active by gsi3).

    A job's state change finds its run by the job's name (assetflow names a job after its run), else by the job's
    tags: no item leads from a job run id back to its run.
    """

    #: Threads for independent updates (made on first use).
    _pool: ThreadPoolExecutor | None = None

    def _run_from_item(self, raw: Mapping[str, Any], *, with_events: bool) -> Run:
        return self._runs_from_items([raw], with_events=with_events)[0]

    def _runs_from_items(self, raws: Sequence[Mapping[str, Any]], *, with_events: bool) -> list[Run]:
        """Runs from their items; their triggering events read in batches when asked for."""
        docs: list[dict[str, Any]] = []
        referenced: list[dict[str, Any]] = []
        for raw in raws:
            doc = json.loads(raw["run"]["S"])
            doc["state"] = raw["state"]["S"]
            if "job_run_id" in raw:
                doc["job_run_id"] = raw["job_run_id"]["S"]
            if "submission_error" in raw:
                doc["submission_error"] = raw["submission_error"]["S"]
            if "ended_at" in raw:
                doc["ended_at"] = raw["ended_at"]["S"]
            doc["outlet_token_scheme"] = int(raw["token_scheme"]["N"]) if "token_scheme" in raw else 1
            doc["triggering_asset_events"] = {}
            docs.append(doc)
            if with_events and "events" in json.loads(raw["trigger"]["S"]):
                referenced += [
                    {"pk": str_attr(pk), "sk": str_attr(sk)}
                    for pk, sk in json.loads(raw["trigger"]["S"])["events"]
                ]
        events = self._batch_get(referenced) if referenced else {}
        for raw, doc in zip(raws, docs, strict=True):
            if not with_events:
                continue
            trigger = json.loads(raw["trigger"]["S"])
            found: list[dict[str, Any]]
            if "inline" in trigger:  # runs written before their events were referenced
                doc["triggering_asset_events"] = trigger["inline"]
                continue
            if "events" in trigger:
                found = [
                    json.loads(events[(pk, sk)]["event"]["S"])
                    for pk, sk in trigger["events"]
                    if (pk, sk) in events
                ]
            else:
                found = [
                    json.loads(item["event"]["S"])
                    for item in self._query(
                        KeyConditionExpression="pk = :p AND begins_with(sk, :g)",
                        ExpressionAttributeValues={
                            ":p": str_attr(trigger["queue"]),
                            ":g": str_attr(trigger["prefix"]),
                        },
                    )
                ]
            grouped: dict[str, list[dict[str, Any]]] = {}
            for event in found:
                grouped.setdefault(event["asset"], []).append(event)
            doc["triggering_asset_events"] = {
                uri: sorted(events_of, key=lambda e: (e["timestamp"], e["id"]))
                for uri, events_of in sorted(grouped.items())
            }
        return [Run.from_json(doc) for doc in docs]

    def get_run(self, run_id: str, *, with_events: bool = True) -> Run:
        """A run, with its triggering events by default.

        Raises:
            NotFoundError: no such run.
        """
        found = self._call("get_item", TableName=self.table, Key=run_key(run_id), ConsistentRead=True)
        if "Item" not in found:
            raise NotFoundError(f"no run {run_id!r}")
        return self._run_from_item(found["Item"], with_events=with_events)

    def list_runs(self, pipeline: str | None = None, *, limit: int = 50, token: str | None = None) -> Page:
        """Runs, newest first, of one pipeline or of all (without their triggering events)."""
        if pipeline:
            keys, nxt = self._page(
                limit,
                token,
                "gsi1",
                KeyConditionExpression="gsi1pk = :p",
                ExpressionAttributeValues={":p": str_attr(f"RUNS#{pipeline}")},
                ScanIndexForward=False,
            )
        else:
            keys, nxt = self._page(
                limit,
                token,
                "gsi2",
                KeyConditionExpression="gsi2pk = :p",
                ExpressionAttributeValues={":p": str_attr("RUNS")},
                ScanIndexForward=False,
            )
        items = self._items_by_keys(keys)
        return Page([run.to_json() for run in self._runs_from_items(items, with_events=False)], nxt)

    def unsubmitted_runs(self, pipeline: str) -> list[Run]:
        """Runs created but not yet accepted by EMR Serverless (a crash or a failed StartJobRun), oldest first.

        The runs listed on the pipeline's ``PENDING#`` items, and (made before those) the runs under
        ``UNSUBMITTED#<pipeline>`` on gsi3. Listed runs that no longer wait (submitted by a process that died
        before taking them off, cancelled, failed) are taken off here.
        """
        pending = [
            ({"pk": item["pk"], "sk": item["sk"]}, set(item.get("runs", {}).get("SS", [])))
            for item in self._query(
                KeyConditionExpression="pk = :p",
                ExpressionAttributeValues={":p": str_attr(pending_partition(pipeline))},
                ConsistentRead=True,
            )
        ]
        keys = [run_key(run_id) for run_id in sorted(set().union(*(ids for _, ids in pending)))]
        keys += self._query(
            "gsi3",
            KeyConditionExpression="gsi3pk = :p",
            ExpressionAttributeValues={":p": str_attr(f"UNSUBMITTED#{pipeline}")},
        )
        if not keys:
            return []
        items = [
            i
            for i in self._items_by_keys(keys)
            if i["state"]["S"] == RunState.QUEUED.value and "job_run_id" not in i
        ]
        waiting = {i["pk"]["S"].removeprefix("RUN#") for i in items}
        for key, ids in pending:
            settled = ids - waiting
            if settled:
                self._take_off(key, settled)
        found = self._runs_from_items(items, with_events=True)
        return sorted(found, key=lambda r: (r.created_at, r.run_id))

    def forget_pending(self, runs: Sequence[Run]) -> None:
        """Take runs whose job run ids are recorded off the pending items (harmless when repeated)."""
        for (pipeline, created_at), ids in sorted(_by_moment(runs).items()):
            self._take_off(_pending_key(pipeline, created_at), ids)

    def _take_off(self, key: Mapping[str, Any], run_ids: set[str]) -> None:
        """Take ``run_ids`` off a pending item: delete it when they are all it lists (the usual case).

        Every step is conditional and nothing else is ever taken off: a step that loses a race leaves the runs
        listed, and the next sweep takes them off.
        """
        names = {"#r": "runs"}
        values = {":ids": {"SS": sorted(run_ids)}}
        listed = dict(Key=key, ExpressionAttributeNames=names)
        deleted = self._unless_conflict(
            "delete_item", **listed, ConditionExpression="#r = :ids", ExpressionAttributeValues=values
        )
        if deleted is not None:
            return
        # It lists other runs too (still waiting, or made at the same moment), or it is gone.
        answer = self._unless_conflict(
            "update_item",
            **listed,
            UpdateExpression="DELETE #r :ids",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
        )
        if answer is not None and "runs" not in answer.get("Attributes", {}):
            # An emptied set is removed, and so is the item, unless runs were added meanwhile.
            self._unless_conflict("delete_item", **listed, ConditionExpression="attribute_not_exists(#r)")

    def _unless_conflict(self, operation: str, **kwargs: Any) -> dict[str, Any] | None:
        """A conditional write's answer; None when its condition failed or it lost a race (nothing written)."""
        try:
            return dict(self._call(operation, TableName=self.table, **kwargs))
        except ConflictError:
            return None

    def submitted_active_runs(self) -> list[Run]:
        """Runs submitted to the job service and still queued or running by the store, oldest first.

        What the reconciliation sweep compares with the job service (a state change it never got leaves a
        run here). A run that ended after it was listed may still appear once: check its state.
        """
        keys = [
            key
            for shard in range(ACTIVE_SHARDS)
            for key in self._query(
                "gsi3",
                KeyConditionExpression="gsi3pk = :p",
                ExpressionAttributeValues={":p": str_attr(f"ACTIVE#{shard:02d}")},
            )
        ]
        if not keys:  # the index holds keys only: the runs themselves are read in batches
            return []
        found = self._runs_from_items(self._items_by_keys(keys), with_events=False)
        return sorted(found, key=lambda r: (r.created_at, r.run_id))

    def mark_submitted(self, run_id: str, job_run_id: str) -> None:
        """Record EMR Serverless's job run id (and the way back from it); harmless when repeated.

        Raises:
            AlreadySubmittedError: the run was already submitted under another job run id.
            ConflictError: the write lost a race with another writer of the run; retry.
            NotFoundError: no such run.
        """
        failures = self.mark_submitted_many({run_id: job_run_id})
        if run_id in failures:
            raise failures[run_id]

    def mark_submitted_many(self, submitted: Mapping[str, str]) -> dict[str, AssetflowError]:
        """Record many runs' job run ids: a conditional update of each run, a few at a time.

        Not a transaction: a transaction bills every item twice. Returns the runs whose id could not be
        recorded, with why (``AlreadySubmittedError``, ``NotFoundError``, or a ``ConflictError`` to retry).
        """
        pairs = sorted(submitted.items())
        if len(pairs) > 1:
            # The updates are independent: a few at a time, as the runs were started.
            answers = list(self._executor().map(lambda pair: self._record_job_run_id(*pair), pairs))
        else:
            answers = [self._record_job_run_id(*pair) for pair in pairs]
        return {
            run_id: error
            for (run_id, _job_run_id), error in zip(pairs, answers, strict=True)
            if error is not None
        }

    def _record_job_run_id(
        self, run_id: str, job_run_id: str, *, found: RunState | None = None
    ) -> AssetflowError | None:
        """One run's job run id, by a conditional update; why it could not be recorded, if it could not.

        A run handed to the job service is running (as an Airflow dag run is once started: its job may still
        wait for capacity), so the same write moves a queued run on: the job's own RUNNING state then changes
        nothing, and the run-state rule does not forward it (a function invocation and a write unit a run). A run
        no longer queued (``found`` in another state: cancelled, or its end recorded first) keeps its state: a
        second write, conditional on that state, records the id alone, and lists the run among the submitted
        active runs only if it is still active (an ended run's entry would stay there for good).
        """
        # Now among the submitted active runs (gsi3), sorted by creation as in gsi1; a run made before pending
        # items moves there from UNSUBMITTED#<pipeline>.
        active = found is None or found.active
        update = "SET job_run_id = :j" + (", gsi3pk = :active, gsi3sk = gsi1sk" if active else "")
        condition = "attribute_exists(pk) AND (attribute_not_exists(job_run_id) OR job_run_id = :j)"
        values = {":j": str_attr(job_run_id)}
        if active:
            values[":active"] = str_attr(active_partition(run_id))
        if found is None:
            update += ", #s = :running"
            condition += " AND #s = :queued"
            values |= {
                ":running": str_attr(RunState.RUNNING.value),
                ":queued": str_attr(RunState.QUEUED.value),
            }
        else:
            condition += " AND #s = :found"
            values[":found"] = str_attr(found.value)
        try:
            self._call(
                "update_item",
                TableName=self.table,
                Key=run_key(run_id),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                ExpressionAttributeNames={"#s": "state"},
            )
        except ConflictError as exc:
            if not condition_failed(exc):
                return exc  # a lost race with a transaction on the run (TransactionConflict): try again
            old = failed_item(exc)
            if old is None:
                return NotFoundError(f"no run {run_id!r}")
            if old.get("job_run_id", {}).get("S") not in (None, job_run_id):
                return AlreadySubmittedError(
                    f"run {run_id} was already submitted as {old['job_run_id']['S']}"
                )
            state = RunState(old["state"]["S"]) if "state" in old else None
            if found is None and state is not None and state is not RunState.QUEUED:
                # No longer queued: it keeps its state, and the id is recorded alone.
                return self._record_job_run_id(run_id, job_run_id, found=state)
            return exc  # a lost race: try again
        except AssetflowError as exc:
            return exc
        return None

    def _executor(self) -> ThreadPoolExecutor:
        with _POOL_LOCK:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=UPDATE_WORKERS, thread_name_prefix="assetflow-runs"
                )
            return self._pool

    def record_submission_failure(self, run_id: str, reason: str, *, now: datetime) -> None:
        """Keep the last submission error on the run for operators (the run stays queued and is retried)."""
        self._call(
            "update_item",
            TableName=self.table,
            Key=run_key(run_id),
            UpdateExpression="SET submission_error = :r, submission_failed_at = :t ADD submission_attempts :one",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={
                ":r": str_attr(reason[:1000]),
                ":t": str_attr(format_timestamp(now)),
                ":one": num_attr(1),
            },
        )

    def set_run_state(
        self,
        run_id: str,
        new: RunState,
        *,
        job_run_id: str | None = None,
        now: datetime | None = None,
        attempts: int = 5,
    ) -> tuple[Run, bool]:
        """Move a run to ``new`` if the state table allows it; a move out of an active state frees a slot.

        Returns the run as stored afterwards and whether this call moved it (False for a duplicate or a
        late, out-of-order state event, which change nothing, and for a ``job_run_id`` that is not the
        run's). A run that does not count in its pipeline's active runs moves with one conditional update; a
        counted one with a transaction that also takes it off the counter, exactly once. ``now``: a final
        state records it as the run's ``ended_at`` (kept by a repeated state change).

        Raises:
            NotFoundError: no such run.
            ConflictError: the run kept changing under concurrent state events.
        """
        allowed = sorted(s.value for s in previous_states(new))
        if not allowed:
            return self.get_run(run_id, with_events=False), False
        update, values, names = self._state_update(new, job_run_id, now)
        values |= {f":p{n}": str_attr(state) for n, state in enumerate(allowed)} | {
            ":uncounted": {"BOOL": False}
        }
        condition = f"#s IN ({', '.join(f':p{n}' for n in range(len(allowed)))}) AND counted = :uncounted"
        condition += _JOB_CONDITION if job_run_id else ""
        try:
            answer = self._call(
                "update_item",
                TableName=self.table,
                Key=run_key(run_id),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return self._run_from_item(answer["Attributes"], with_events=False), True
        except ConflictError as exc:
            if condition_failed(exc):
                old = failed_item(exc)
            else:  # a lost race with a transaction on the run (TransactionConflict): read it, go on from there
                old = self._call(
                    "get_item", TableName=self.table, Key=run_key(run_id), ConsistentRead=True
                ).get("Item")
        for _ in range(attempts):
            if old is None:
                raise NotFoundError(f"no run {run_id!r}")
            run = self._run_from_item(old, with_events=False)
            if run.state not in previous_states(new) or (
                job_run_id and run.job_run_id not in (None, job_run_id)
            ):
                return run, False  # a late or repeated state, or another job's: nothing moves
            moved = self._move_counted(
                run, new, job_run_id, now, counted=old.get("counted", {}).get("BOOL", True)
            )
            if moved is not None:
                return moved, True
            found = self._call("get_item", TableName=self.table, Key=run_key(run_id), ConsistentRead=True)
            old = found.get("Item")
        raise ConflictError(f"run {run_id} kept changing; try again")

    @staticmethod
    def _state_update(
        new: RunState, job_run_id: str | None, now: datetime | None
    ) -> tuple[str, dict[str, Any], dict[str, str]]:
        values: dict[str, Any] = {":new": str_attr(new.value)}
        update = "SET #s = :new"
        if job_run_id:
            update += ", job_run_id = if_not_exists(job_run_id, :j)"
            values[":j"] = str_attr(job_run_id)
        if now is not None and not new.active:
            update += ", ended_at = if_not_exists(ended_at, :end)"
            values[":end"] = str_attr(format_timestamp(now))
        if not new.active:
            update += " REMOVE gsi3pk, gsi3sk"  # a finished run never waits for submission again
        return update, values, {"#s": "state"}

    def _move_counted(
        self, run: Run, new: RunState, job_run_id: str | None, now: datetime | None, *, counted: bool
    ) -> Run | None:
        """Move a run from the state it was read in; None when it changed meanwhile (read it again)."""
        update, values, names = self._state_update(new, job_run_id, now)
        values[":cur"] = str_attr(run.state.value)
        writes: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self.table,
                    "Key": run_key(run.run_id),
                    "UpdateExpression": update,
                    "ConditionExpression": "#s = :cur" + (_JOB_CONDITION if job_run_id else ""),
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": values,
                }
            }
        ]
        if counted and run.state.active and not new.active:
            # Exactly once per run: the condition on the run's state guards the decrement.
            writes.append(
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": active_key(run.pipeline),
                        "UpdateExpression": "ADD active :minus",
                        "ExpressionAttributeValues": {":minus": num_attr(-1)},
                    }
                }
            )
        try:
            self._call("transact_write_items", TransactItems=writes)
        except ConflictError:
            return None  # another state event moved the run meanwhile: read again and decide again
        ended = run.ended_at or (now if not new.active else None)
        return replace(run, state=new, job_run_id=run.job_run_id or job_run_id, ended_at=ended)
