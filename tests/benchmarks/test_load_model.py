"""The AWS load model's arithmetic on hand-computed cases: pure, no emulators, no AWS."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from benchmarks import load_model as lm

LIMITS = lm.AwsLimits()
TODAY = lm.Deployment()


def bound(result: lm.Result, prefix: str) -> float:
    """The events/s of the one bound whose name starts with ``prefix``."""
    (found,) = [b for b in result.bounds if b.name.startswith(prefix)]
    return found.events_per_second


# ---- hot keys ---------------------------------------------------------------------------------------------


def test_a_hot_key_takes_1000_write_units_a_second_however_many_partitions_the_table_has() -> None:
    one_unit = replace(lm.SINGLE, keys=replace(lm.SINGLE.keys, asset_write=1.0, meta_write=0.0))
    for partitions in (1, 4, 64, 100_000):
        result = lm.bounds(one_unit, replace(TODAY, stream_shards=partitions))
        assert bound(result, "asset key writes") == pytest.approx(1_000.0)
    assert lm.hot_key_bound(1.0, 1, LIMITS) == 1_000.0
    assert lm.hot_key_bound(4.0, 1, LIMITS) == 250.0
    assert lm.hot_key_bound(0.0, 1, LIMITS) == math.inf


def test_todays_asset_key_takes_125_events_a_second_and_the_summary_item_caps_sharding() -> None:
    # 8 WCU per event on ASSET#<uri>, 4 of them on the single #META item.
    assert bound(lm.bounds(lm.SINGLE, TODAY), "asset key writes") == pytest.approx(1_000 / 8)
    # Four shards: the busiest key has 4/4 of the sharded units plus the whole #META: 1,000 / 5.
    four = replace(TODAY, asset_shards=4)
    assert lm.asset_key_write_units(lm.SINGLE.keys, four) == pytest.approx(5.0)
    assert bound(lm.bounds(lm.SINGLE, four), "asset key writes") == pytest.approx(200.0)
    # However many shards, #META alone allows 1,000 / 4 = 250 ...
    many = replace(TODAY, asset_shards=4096)
    assert bound(lm.bounds(lm.SINGLE, many), "asset key writes") < 250.0
    # ... unless it is updated once per batch: 4/4 + 4/25 = 1.16 units per event.
    batched = replace(four, meta_per_batch=True)
    assert lm.asset_key_write_units(lm.SINGLE.keys, batched) == pytest.approx(1.16)
    assert bound(lm.bounds(lm.SINGLE, batched), "asset key writes") == pytest.approx(1_000 / 1.16)


def test_an_a_and_b_pipeline_spreads_its_events_over_two_asset_keys_but_one_queue() -> None:
    result = lm.bounds(lm.AND, TODAY)
    assert bound(result, "asset key writes") == pytest.approx(2 * 1_000 / 8)
    assert bound(result, "queue entries") == pytest.approx(1_000 / 4)  # SEEN marker + entry, 2 WCU each
    assert bound(result, "queue head serialization") == pytest.approx(1 / 0.015)  # 5 ms read + 10 ms commit
    sharded = lm.bounds(lm.AND, replace(TODAY, queue_shards=8))
    assert bound(sharded, "queue entries") == pytest.approx(8 * 250)
    # This branch: the entry (2) and a tenth of a seen set's update (2 per transaction of ~10 events)
    branch = lm.bounds(lm.BRANCH_AND, lm.BRANCH, costs=lm.BRANCH_COSTS)
    assert bound(branch, "queue entries") == pytest.approx(1_000 / 2.2)


def test_global_index_keys_bound_the_whole_environment() -> None:
    result = lm.bounds(lm.SINGLE, TODAY)
    # gsi1 ASSETS: 3 WCU per event and 3 more for the run's outlet event; gsi2 RUNS: 14 per run.
    assert bound(result, "gsi1 ASSETS") == pytest.approx(1_000 / 6)
    assert bound(result, "gsi2 RUNS") == pytest.approx(1_000 / 14)
    assert bound(lm.bounds(lm.SINGLE, replace(TODAY, index_shards=10)), "gsi2 RUNS") == pytest.approx(
        10_000 / 14
    )


# ---- shard fan-out on reads -------------------------------------------------------------------------------


def test_sharded_keys_cost_a_query_per_shard_to_list() -> None:
    cost = lm.shard_read_cost(8, page=50, item_kb=1.0)
    # Each shard: ceil(50 x 1 KB / 4 KB) = 13 units, halved for eventually consistent reads.
    assert cost == {
        "queries": 8.0,
        "items_read": 400.0,
        "read_units": 8 * 6.5,
        "read_units_unsharded": 6.5,
        "factor": 8.0,
    }
    assert (
        lm.shard_read_cost(1, page=50)["read_units"] == lm.shard_read_cost(1, page=50)["read_units_unsharded"]
    )
    assert lm.shard_read_cost(3, page=100, item_kb=2.0, consistent=True)["read_units"] == 3 * 50.0


# ---- the evaluator: lanes, batches, parallelization factor ------------------------------------------------


def test_a_lane_handles_a_batch_at_a_time() -> None:
    latencies = lm.Latencies()
    # and, one event at a time: 8 DynamoDB calls x 5 ms + 2 PutEvents x 20 ms = 80 ms; 10 ms per invocation.
    seconds = lm.evaluator_seconds_per_batch(lm.AND, TODAY, latencies, 0.0, LIMITS)
    assert seconds == pytest.approx((10 + 25 * 80) / 1000)
    assert lm.lane_events_per_second(lm.AND, TODAY, latencies, 0.0, LIMITS) == pytest.approx(25 / 2.010)
    # single adds per run: S3 PUT 30 + StartJobRun 150 + the submitted mark 10 ms; 14 calls x 5 + 40 = 110.
    single = lm.evaluator_seconds_per_batch(lm.SINGLE, TODAY, latencies, 1.0, LIMITS)
    assert single == pytest.approx((10 + 25 * 300) / 1000)


def test_parallelization_factor_scales_the_stream_but_not_one_unsharded_key() -> None:
    per_p = {p: lm.bounds(lm.AND, replace(TODAY, parallelization_factor=p)) for p in (1, 2, 10)}
    whole = {p: bound(r, "evaluator, whole stream") for p, r in per_p.items()}
    assert whole[2] == pytest.approx(2 * whole[1])
    assert whole[10] == pytest.approx(10 * whole[1])
    pair = {p: bound(r, "evaluator lanes") for p, r in per_p.items()}
    assert pair[1] == pair[2] == pair[10]  # two keys (a, b): two lanes, whatever P
    # Sharded keys use the lanes: N shards over shards x P lanes, at most N.
    assert lm.lanes_for_one_key_group(1, replace(TODAY, parallelization_factor=10)) == 1
    assert lm.lanes_for_one_key_group(8, replace(TODAY, stream_shards=4, parallelization_factor=1)) == 4
    assert lm.lanes_for_one_key_group(8, replace(TODAY, stream_shards=4, parallelization_factor=2)) == 8
    assert lm.lanes_for_one_key_group(8, replace(TODAY, stream_shards=4, parallelization_factor=10)) == 8


def test_batch_evaluation_folds_a_batch_into_transactions_of_49_events() -> None:
    batched = replace(TODAY, batch_evaluation=True, batch_size=100)
    # 100 actions per transaction: head and active runs, then 2 per event.
    assert lm.events_per_transition(batched, LIMITS, lm.AND) == 49
    assert lm.events_per_transition(replace(batched, batch_size=10), LIMITS, lm.AND) == 10
    assert lm.events_per_transition(TODAY, LIMITS, lm.AND) == 1
    result = lm.bounds(lm.AND, batched)
    assert bound(result, "queue head serialization") == pytest.approx(49 / 0.015)


# ---- quotas, EMR Serverless, the sustained rate ------------------------------------------------------------


def test_table_quota_and_emr_limits() -> None:
    result = lm.bounds(lm.SINGLE, TODAY)
    # 13.03 WRU per event + 46.99 per run = 60.02 (the cost benchmark's single scenario).
    assert bound(result, "table write quota") == pytest.approx(40_000 / 60.02)
    assert bound(result, "EMR Serverless StartJobRun") == 1.0
    assert bound(result, "EMR Serverless concurrent vCPUs") == pytest.approx(16 / (8 * 60))
    assert result.sustained == pytest.approx(16 / 480)
    assert result.binding.name == "EMR Serverless concurrent vCPUs"
    raised = lm.bounds(lm.SINGLE, TODAY, replace(LIMITS, emr_vcpus=4_000))
    assert raised.binding.name == "EMR Serverless StartJobRun rate"


def test_batch_runs_do_not_bound_events_while_the_account_can_run_them() -> None:
    result = lm.bounds(lm.AND, TODAY)
    assert bound(result, "EMR Serverless") == math.inf
    too_many = replace(lm.AND, batch_runs_per_second=2.0)  # above StartJobRun's 1/s
    assert bound(lm.bounds(too_many, TODAY), "EMR Serverless") == 0.0
    assert lm.runs_per_event(lm.AND, 100.0) == pytest.approx(1 / 6000)
    assert lm.runs_per_event(lm.SINGLE, 100.0) == 1.0


def test_plan_reaches_10000_for_a_batch_pipeline_but_not_a_run_per_event() -> None:
    planned = lm.plan(lm.AND, 10_000)
    assert planned["reached"], planned["still_short"]
    assert planned["sustained_events_per_second"] >= 10_000
    d = planned["deployment"]
    assert d["batch_evaluation"] and d["meta_per_batch"]
    # asset key: 2 keys x 1,000 / (4/N + 4/100) >= 10,000  =>  N >= 25.
    assert d["asset_shards"] == 25
    # queue entries: N x 1,000 / 4 >= 10,000  =>  40 sub-queues.
    assert d["queue_shards"] == 40
    single = lm.plan(lm.SINGLE, 10_000)
    assert not single["reached"]
    assert single["binding"].startswith("EMR Serverless")


def test_the_script_writes_its_json(tmp_path: Path) -> None:
    assert lm.main(["--quick", "--results-dir", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "load_model-quick.json").read_text())
    results = document["results"]
    assert set(results["today"]) == {"single", "and"}
    assert results["plans"]["and"]["reached"] is True
    assert "emr_serverless" in results["sources"]


# ---- this branch: batched evaluation, keys-only indexes, hot assets sharded where the model says ----------


def test_this_branch_puts_2_2_write_units_per_event_on_an_asset_key_so_one_key_takes_about_450_a_second() -> (
    None
):
    # The event item in the ingest transaction (2) and a tenth of the summary's count (2 per batch of 10).
    assert lm.asset_key_write_units(lm.BRANCH_SINGLE.keys, lm.BRANCH) == pytest.approx(2.2)
    result = lm.bounds(lm.BRANCH_SINGLE, lm.BRANCH, costs=lm.BRANCH_COSTS)
    assert bound(result, "asset key writes") == pytest.approx(1_000 / 2.2)
    # Keys-only indexes: a run writes its index entries once (not on each state change), a summary never again.
    assert bound(result, "gsi2 RUNS") == pytest.approx(1_000.0)
    assert bound(result, "gsi1 ASSETS") == math.inf


def test_a_hot_asset_needs_write_shards_past_450_events_a_second_and_bigger_ingest_batches_past_5000() -> (
    None
):
    assert lm.asset_shards_needed(450) == 1
    assert lm.asset_shards_needed(500) == 2  # 2 / 2 + 0.2 = 1.2 units: 833 events/s on the busiest key
    assert lm.asset_shards_needed(2_000) == 7  # 2 / 7 + 0.2 = 0.486 units: 2,059 events/s
    # The summary item is not sharded: 0.2 units per event caps one asset at 5,000 events/s ...
    assert lm.asset_shards_needed(5_000) is None
    # ... unless the ingest batches are bigger (100 messages: 0.02 units per event)
    assert (
        lm.asset_shards_needed(5_000, deployment=replace(lm.BRANCH, meta_batch=100)) == 12
    )  # 5,357 a second
    for rate in (500, 2_000, 3_000):
        shards = lm.asset_shards_needed(rate)
        assert shards is not None
        sharded = lm.bounds(lm.BRANCH_SINGLE, replace(lm.BRANCH, asset_shards=shards))
        assert bound(sharded, "asset key writes") >= rate
        fewer = lm.bounds(lm.BRANCH_SINGLE, replace(lm.BRANCH, asset_shards=shards - 1))
        assert bound(fewer, "asset key writes") < rate


def test_the_branch_plan_reaches_10000_for_a_batch_pipeline() -> None:
    planned = lm.plan(lm.BRANCH_AND, 10_000, start=lm.BRANCH, costs=lm.BRANCH_COSTS)
    assert planned["reached"], planned["still_short"]
    assert planned["deployment"]["asset_shards"] > 1
    assert any(step.startswith("ingest batches of") for step in planned["steps"])


def test_the_branch_unit_costs_are_what_the_committed_cost_run_solves_to() -> None:
    # BRANCH_COSTS is copied into the model (its figures are read without running anything); it must not drift
    # from the cost run saved beside it.
    result = json.loads((Path(lm.__file__).parent / "results" / "cost.json").read_text())
    solved = lm.unit_costs_from_cost_run(result)
    for name, value in asdict(lm.BRANCH_COSTS).items():
        assert getattr(solved, name) == pytest.approx(value, abs=0.011), name
