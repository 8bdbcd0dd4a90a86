"""One job cannot write another run's outlet metadata (moto's S3, KMS and EMR Serverless, DynamoDB Local).

EMR Serverless runs every job of the application under one role, and passes no job tags to its session: IAM
cannot tell runs apart. So a run's outlet metadata is read only from ``runs/<p>/<run>/<token>/outlets.json``,
``token`` an HMAC of the run id under a KMS key that jobs may not use, named in the run's job arguments alone
(the run context, which every job can read, does not hold it; the jobs' role cannot list ``runs/``). Here a
second run's job forges the first run's metadata everywhere it can know of, and none of it is read.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

import assetflow_job
from assetflow import Asset, Catalog, Pipeline, SparkJob
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.adapters.emr import EmrServerlessLauncher, S3RunOutputs, outlet_metadata_uri
from assetflow.adapters.run_tokens import KmsRunTokens
from assetflow.core.events import AssetEvent
from assetflow.usecases.evaluate import Evaluator
from assetflow.usecases.job_state import RunStates
from assetflow_dev import LOCAL_ACCOUNT_ID, client
from assetflow_job.context import split_context_argument
from assetflow_job.contract import OUTLETS_ARGUMENT
from assetflow_job.storage import read_bytes

pytestmark = pytest.mark.integration

RAW, CLEAN = Asset("s3://lake/raw"), Asset("s3://lake/clean")
ETL = Pipeline("etl", schedule=[RAW], job=SparkJob("spark_jobs/etl.py"), outlets=[CLEAN], batch=False)
T0 = datetime(2026, 11, 21, 8, tzinfo=UTC)


@dataclass
class World:
    store: DynamoDbStore
    s3: Any
    emr: Any
    kms: Any
    bucket: str
    key: str
    application: str
    evaluator: Evaluator
    states: RunStates
    dynamodb: Any

    def arguments(self, run_id: str) -> list[str]:
        job_run_id = self.store.get_run(run_id).job_run_id
        job = self.emr.get_job_run(applicationId=self.application, jobRunId=job_run_id)["jobRun"]
        return list(job["jobDriver"]["sparkSubmit"]["entryPointArguments"])


@pytest.fixture
def world(dynamodb_local: Any, moto_server: Any) -> Iterator[World]:
    dynamodb = client("dynamodb", dynamodb_local.endpoint)
    store = DynamoDbStore(dynamodb, f"scoped-{uuid.uuid4().hex[:10]}")
    store.create_table()
    s3, emr, kms = (client(s, moto_server.endpoint) for s in ("s3", "emr-serverless", "kms"))
    bucket = f"runs-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=bucket)
    key = kms.create_key(KeySpec="HMAC_256", KeyUsage="GENERATE_VERIFY_MAC")["KeyMetadata"]["Arn"]
    application = emr.create_application(name=store.table, releaseLabel="emr-7.9.0", type="SPARK")[
        "applicationId"
    ]
    launcher = EmrServerlessLauncher(
        emr_client=emr,
        s3_client=s3,
        application_id=application,
        execution_role_arn=f"arn:aws:iam::{LOCAL_ACCOUNT_ID}:role/jobs",
        runs_bucket=bucket,
        events_table=store.table,
        run_tokens=KmsRunTokens(kms, key),
    )
    clock = lambda: datetime.now(UTC)  # noqa: E731
    catalog = Catalog.build([ETL])
    evaluator = Evaluator(catalog=catalog, store=store, launcher=launcher, clock=clock)
    # The run-state function is another container: its own KMS client and token memory.
    outputs = S3RunOutputs(s3, bucket, run_tokens=KmsRunTokens(client("kms", moto_server.endpoint), key))
    states = RunStates(catalog=catalog, store=store, outputs=outputs, evaluator=evaluator, clock=clock)
    yield World(store, s3, emr, kms, bucket, key, application, evaluator, states, dynamodb)
    dynamodb.delete_table(TableName=store.table)


def test_a_job_cannot_write_another_runs_outlet_metadata(world: World) -> None:
    # Given two runs of the pipeline
    for n in (1, 2):
        world.evaluator.handle_event(world.store.put_event(AssetEvent(RAW.uri, f"e{n}", T0))[0])
    runs = [world.store.get_run(r["run_id"]).to_json() for r in world.store.list_runs(ETL.id).items]
    victim, attacker = sorted(runs, key=lambda r: r["triggering_asset_events"][RAW.uri][0]["id"])
    victim_args = world.arguments(victim["run_id"])
    secret = victim_args[victim_args.index(OUTLETS_ARGUMENT) + 1]

    # The victim's secret place is in its own arguments only: not in its context (inline in the arguments when
    # small, else in S3, where every job can read it), not another run's
    context = read_bytes(split_context_argument(victim_args)[0], s3_client=world.s3)
    token = secret.split("/")[-2]
    assert token not in context.decode()
    assert token not in " ".join(world.arguments(attacker["run_id"]))
    assert secret != outlet_metadata_uri(world.bucket, ETL.id, victim["run_id"])

    # When the attacker's job forges the victim's metadata wherever it can know of (the plain place next to
    # the victim's context, and its own secret place with the victim's run id)...
    forged = {
        "format": "assetflow.outlet-metadata",
        "version": 1,
        "run_id": victim["run_id"],
        "events": [{"asset": CLEAN.uri, "extra": {"forged": True}, "alias": None}],
    }
    bucket_and_key = (
        outlet_metadata_uri(world.bucket, ETL.id, victim["run_id"]).removeprefix("s3://").split("/", 1)
    )
    world.s3.put_object(Bucket=bucket_and_key[0], Key=bucket_and_key[1], Body=json.dumps(forged).encode())
    with assetflow_job.run(world.arguments(attacker["run_id"]), s3_client=world.s3) as ctx:
        ctx.outlet_events[CLEAN.uri].extra = {"forged": True, "by": ctx.run_id}
    # ...and the victim's own job writes its metadata through the helper
    with assetflow_job.run(victim_args, s3_client=world.s3) as ctx:
        assert ctx.outlet_metadata_uri == secret
        ctx.outlet_events[CLEAN.uri].extra = {"rows": 8}

    # Then each run's outlet event carries its own job's metadata, and nothing forged reached the victim's
    victim_change = world.states.handle_state_change(
        victim["job_run_id"], "SUCCESS", world.application, job_run_name=victim["run_id"]
    )
    attacker_change = world.states.handle_state_change(
        attacker["job_run_id"], "SUCCESS", world.application, job_run_name=attacker["run_id"]
    )
    assert [dict(e.extra) for e in victim_change.emitted] == [{"rows": 8}]
    assert [dict(e.extra) for e in attacker_change.emitted] == [{"forged": True, "by": attacker["run_id"]}]


def test_run_tokens_are_the_same_in_every_container_and_differ_per_run(world: World) -> None:
    one, two = (
        KmsRunTokens(world.kms, world.key),
        KmsRunTokens(client("kms", world.kms.meta.endpoint_url), world.key),
    )

    assert one.token("run-a") == two.token("run-a") != one.token("run-b")
    assert len(one.token("run-a")) >= 40


class _CountingKms:
    """A KMS client that counts its GenerateMac requests."""

    def __init__(self, kms: Any) -> None:
        self.kms, self.macs = kms, 0

    def generate_mac(self, **kwargs: Any) -> Any:
        self.macs += 1
        return self.kms.generate_mac(**kwargs)


def test_runs_tokens_cost_one_kms_request_per_container_not_one_per_run(world: World) -> None:
    # Given a container's token maker
    kms = _CountingKms(world.kms)
    tokens = KmsRunTokens(kms, world.key)

    # When it makes the tokens of 50 runs, 8 at a time as a batch's submissions do (and again, as the run-state
    # function does at their ends)
    with ThreadPoolExecutor(8) as pool:
        made = list(pool.map(tokens.token, [f"run-{n}" for n in range(50)]))
    made += [tokens.token(f"run-{n}") for n in range(50)]

    # Then KMS was asked once, every run has its own token, and another container makes the same ones
    assert kms.macs == 1
    assert len(set(made)) == 50
    assert KmsRunTokens(client("kms", world.kms.meta.endpoint_url), world.key).token("run-7") == made[7]
    # (and a scheme-1 token, a MAC per run, is another secret)
    assert tokens.token("run-7", scheme=1) != made[7]
    assert kms.macs == 2


def test_a_run_made_before_token_schemes_is_submitted_and_read_with_its_own_kms_mac(world: World) -> None:
    # Given a run whose item an earlier version wrote: no token scheme beside its JSON, not yet submitted
    from assetflow.adapters.dynamodb.runs import run_put
    from assetflow.core.events import Run, RunState

    event, _ = world.store.put_event(AssetEvent(RAW.uri, "old-1", T0))
    run = Run("run-before-schemes", ETL.id, RunState.QUEUED, T0, triggering_asset_events={RAW.uri: (event,)})
    put = run_put(world.store.table, run, {"inline": {RAW.uri: [event.to_json()]}}, counted=False)
    del put["Item"]["token_scheme"]
    world.dynamodb.put_item(**put)
    stored = world.store.get_run(run.run_id)
    assert stored.outlet_token_scheme == 1

    # When the current version submits it and its job writes outlet metadata through the helper
    job_run_id = world.evaluator.launcher.submit(stored, ETL)
    world.store.mark_submitted(run.run_id, job_run_id)
    arguments = world.arguments(run.run_id)
    place = arguments[arguments.index(OUTLETS_ARGUMENT) + 1]
    with assetflow_job.run(arguments, s3_client=world.s3) as ctx:
        ctx.outlet_events[CLEAN.uri].extra = {"rows": 3}

    # Then its place is under the KMS MAC of its run id, as the earlier version put it, and its end reads it there
    assert place.split("/")[-2] == KmsRunTokens(world.kms, world.key).token(run.run_id, scheme=1)
    change = world.states.handle_state_change(
        job_run_id, "SUCCESS", world.application, job_run_name=run.run_id
    )
    assert [dict(e.extra) for e in change.emitted] == [{"rows": 3}]
