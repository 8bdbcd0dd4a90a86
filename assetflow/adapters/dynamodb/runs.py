"""The runs aggregate: run items, their states, job run ids and the way back from a job run to its run."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from assetflow.adapters.dynamodb.table import DynamoDbTable, generation_prefix, num_attr, str_attr
from assetflow.core.errors import AlreadySubmittedError, ConflictError, NotFoundError
from assetflow.core.events import Run, RunState, format_timestamp, previous_states
from assetflow.ports import Page

#: Submitted runs still queued or running are listed on gsi3 under ``ACTIVE#<shard>`` (a key only while
#: they are), spread over this many partitions so that no index partition takes every submission's write.
ACTIVE_SHARDS = 16


def active_partition(run_id: str) -> str:
    """The gsi3 partition that lists a submitted, still active run (for the reconciliation sweep)."""
    shard = int(hashlib.sha256(run_id.encode()).hexdigest()[:8], 16) % ACTIVE_SHARDS
    return f"ACTIVE#{shard:02d}"


def run_put(table: str, run: Run, partition: str, generation: int, batch: bool) -> dict[str, Any]:
    """The conditional put that creates a run (part of the transition that makes it).

    A batch run's triggering events stay in its queue generation, referenced; others are copied inline.
    """
    created = format_timestamp(run.created_at)
    doc = run.to_json()
    triggers = doc.pop("triggering_asset_events")
    trigger = (
        {"queue": partition, "prefix": generation_prefix(generation)}
        if batch and triggers
        else {"inline": triggers}
    )
    item: dict[str, Any] = {
        "pk": str_attr(f"RUN#{run.run_id}"),
        "sk": str_attr("#RUN"),
        "run": str_attr(json.dumps(doc, sort_keys=True)),
        "state": str_attr(run.state.value),
        "pipeline": str_attr(run.pipeline),
        "trigger": str_attr(json.dumps(trigger, sort_keys=True)),
        "gsi3pk": str_attr(f"UNSUBMITTED#{run.pipeline}"),
        "gsi3sk": str_attr(f"{created}#{run.run_id}"),
        "gsi1pk": str_attr(f"RUNS#{run.pipeline}"),
        "gsi1sk": str_attr(f"{created}#{run.run_id}"),
        "gsi2pk": str_attr("RUNS"),
        "gsi2sk": str_attr(f"{created}#{run.run_id}"),
    }
    return {"TableName": table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}


class DynamoDbRunStore(DynamoDbTable):
    """Runs under ``RUN#<id>`` (listed by gsi1/gsi2, waiting for submission by gsi3); ``JOBRUN#<id>`` leads back."""

    def _run_from_item(self, raw: Mapping[str, Any], *, with_events: bool) -> Run:
        doc = json.loads(raw["run"]["S"])
        doc["state"] = raw["state"]["S"]
        if "job_run_id" in raw:
            doc["job_run_id"] = raw["job_run_id"]["S"]
        if "submission_error" in raw:
            doc["submission_error"] = raw["submission_error"]["S"]
        doc["triggering_asset_events"] = {}
        if with_events:
            trigger = json.loads(raw["trigger"]["S"])
            if "inline" in trigger:
                doc["triggering_asset_events"] = trigger["inline"]
            else:
                grouped: dict[str, list[dict[str, Any]]] = {}
                for item in self._query(
                    KeyConditionExpression="pk = :p AND begins_with(sk, :g)",
                    ExpressionAttributeValues={
                        ":p": str_attr(trigger["queue"]),
                        ":g": str_attr(trigger["prefix"]),
                    },
                ):
                    event = json.loads(item["event"]["S"])
                    grouped.setdefault(event["asset"], []).append(event)
                doc["triggering_asset_events"] = {
                    uri: sorted(events, key=lambda e: (e["timestamp"], e["id"]))
                    for uri, events in sorted(grouped.items())
                }
        return Run.from_json(doc)

    def get_run(self, run_id: str, *, with_events: bool = True) -> Run:
        """A run, with its triggering events by default.

        Raises:
            NotFoundError: no such run.
        """
        found = self._call(
            "get_item",
            TableName=self.table,
            Key={"pk": str_attr(f"RUN#{run_id}"), "sk": str_attr("#RUN")},
            ConsistentRead=True,
        )
        if "Item" not in found:
            raise NotFoundError(f"no run {run_id!r}")
        return self._run_from_item(found["Item"], with_events=with_events)

    def list_runs(self, pipeline: str | None = None, *, limit: int = 50, token: str | None = None) -> Page:
        """Runs, newest first, of one pipeline or of all (without their triggering events)."""
        if pipeline:
            items, nxt = self._page(
                limit,
                token,
                "gsi1",
                KeyConditionExpression="gsi1pk = :p",
                ExpressionAttributeValues={":p": str_attr(f"RUNS#{pipeline}")},
                ScanIndexForward=False,
            )
        else:
            items, nxt = self._page(
                limit,
                token,
                "gsi2",
                KeyConditionExpression="gsi2pk = :p",
                ExpressionAttributeValues={":p": str_attr("RUNS")},
                ScanIndexForward=False,
            )
        return Page([self._run_from_item(i, with_events=False).to_json() for i in items], nxt)

    def unsubmitted_runs(self, pipeline: str) -> list[Run]:
        """Runs created but not yet accepted by EMR Serverless (a crash or a failed StartJobRun), oldest first."""
        found = [
            self._run_from_item(i, with_events=True)
            for i in self._query(
                "gsi3",
                KeyConditionExpression="gsi3pk = :p",
                FilterExpression="#s = :q",
                ExpressionAttributeNames={"#s": "state"},
                ExpressionAttributeValues={
                    ":p": str_attr(f"UNSUBMITTED#{pipeline}"),
                    ":q": str_attr(RunState.QUEUED.value),
                },
            )
        ]
        return sorted(found, key=lambda r: (r.created_at, r.run_id))

    def submitted_active_runs(self) -> list[Run]:
        """Runs submitted to the job service and still queued or running by the store, oldest first.

        What the reconciliation sweep compares with the job service (a state change it never got leaves a
        run here). A run that ended after it was listed may still appear once: check its state.
        """
        found = [
            self._run_from_item(item, with_events=False)
            for shard in range(ACTIVE_SHARDS)
            for item in self._query(
                "gsi3",
                KeyConditionExpression="gsi3pk = :p",
                ExpressionAttributeValues={":p": str_attr(f"ACTIVE#{shard:02d}")},
            )
        ]
        return sorted(found, key=lambda r: (r.created_at, r.run_id))

    def mark_submitted(self, run_id: str, job_run_id: str) -> None:
        """Record EMR Serverless's job run id (and the way back from it); harmless when repeated.

        Raises:
            AlreadySubmittedError: the run was already submitted under another job run id.
            ConflictError: the write lost a race with another writer of the run; retry.
        """
        try:
            self._call(
                "transact_write_items",
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": {"pk": str_attr(f"RUN#{run_id}"), "sk": str_attr("#RUN")},
                            # From the runs waiting for submission to the submitted active ones (gsi3).
                            "UpdateExpression": "SET job_run_id = :j, gsi3pk = :active",
                            "ConditionExpression": (
                                "attribute_exists(pk) AND (attribute_not_exists(job_run_id) OR job_run_id = :j)"
                            ),
                            "ExpressionAttributeValues": {
                                ":j": str_attr(job_run_id),
                                ":active": str_attr(active_partition(run_id)),
                            },
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": {
                                "pk": str_attr(f"JOBRUN#{job_run_id}"),
                                "sk": str_attr("#JOBRUN"),
                                "run_id": str_attr(run_id),
                            },
                        }
                    },
                ],
            )
        except ConflictError:
            run = self.get_run(run_id, with_events=False)
            if run.job_run_id == job_run_id:
                return
            if run.job_run_id is None:
                raise  # a lost race (TransactionConflict), not a second job run: the caller retries
            raise AlreadySubmittedError(f"run {run_id} was already submitted as {run.job_run_id}") from None

    def run_id_for_job(self, job_run_id: str) -> str | None:
        """The run an EMR Serverless job run belongs to, if assetflow submitted it."""
        item = self._get(f"JOBRUN#{job_run_id}", "#JOBRUN")
        return str(item["run_id"]) if item else None

    def record_submission_failure(self, run_id: str, reason: str, *, now: datetime) -> None:
        """Keep the last submission error on the run for operators (the run stays queued and is retried)."""
        self._call(
            "update_item",
            TableName=self.table,
            Key={"pk": str_attr(f"RUN#{run_id}"), "sk": str_attr("#RUN")},
            UpdateExpression="SET submission_error = :r, submission_failed_at = :t ADD submission_attempts :one",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={
                ":r": str_attr(reason[:1000]),
                ":t": str_attr(format_timestamp(now)),
                ":one": num_attr(1),
            },
        )

    def set_run_state(
        self, run_id: str, new: RunState, *, job_run_id: str | None = None, attempts: int = 5
    ) -> tuple[Run, bool]:
        """Move a run to ``new`` if the state table allows it; a move out of an active state frees a slot.

        Returns the run as stored afterwards and whether this call moved it (False for a duplicate or a
        late, out-of-order state event, which change nothing).

        Raises:
            NotFoundError: no such run.
            ConflictError: the run kept changing under concurrent state events.
        """
        for _ in range(attempts):
            run = self.get_run(run_id, with_events=False)
            if run.state not in previous_states(new):
                return run, False
            values: dict[str, Any] = {":new": str_attr(new.value), ":cur": str_attr(run.state.value)}
            update = "SET #s = :new"
            if job_run_id:
                update += ", job_run_id = if_not_exists(job_run_id, :j)"
                values[":j"] = str_attr(job_run_id)
            if not new.active:
                update += " REMOVE gsi3pk, gsi3sk"  # a finished run never waits for submission again
            writes: list[dict[str, Any]] = [
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": {"pk": str_attr(f"RUN#{run_id}"), "sk": str_attr("#RUN")},
                        "UpdateExpression": update,
                        "ConditionExpression": "#s = :cur",
                        "ExpressionAttributeNames": {"#s": "state"},
                        "ExpressionAttributeValues": values,
                    }
                }
            ]
            if run.state.active and not new.active:
                # Exactly once per run: the condition on the run's state guards the decrement.
                writes.append(
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": {"pk": str_attr(f"PIPELINE#{run.pipeline}"), "sk": str_attr("#ACTIVE")},
                            "UpdateExpression": "ADD active :minus",
                            "ExpressionAttributeValues": {":minus": num_attr(-1)},
                        }
                    }
                )
            try:
                self._call("transact_write_items", TransactItems=writes)
            except ConflictError:
                continue  # another state event moved the run meanwhile: read again and decide again
            return self.get_run(run_id, with_events=False), True
        raise ConflictError(f"run {run_id} kept changing; try again")
