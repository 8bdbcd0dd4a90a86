"""The benchmark harness, the request counter and the cost model: pure logic, no emulators."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from assetflow import Asset, AssetAlias, Catalog, DailyMapper, PartitionedAssetSchedule, Pipeline, SparkJob
from assetflow_dev import LOCAL_CLIENT_KWARGS
from benchmarks import _common, cost, evaluator_scale
from benchmarks._counting import RequestCounter

JOB = SparkJob("spark_jobs/x.py")


# ---- statistics and output ---------------------------------------------------------------------------------


def test_percentiles_interpolate_between_ranks_like_numpy() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert _common.percentile(values, 0) == 1.0
    assert _common.percentile(values, 50) == 2.5
    assert _common.percentile(values, 95) == pytest.approx(3.85)
    assert _common.percentile(values, 100) == 4.0
    assert _common.percentiles([7.0]) == {"p50": 7.0, "p95": 7.0, "p99": 7.0}
    with pytest.raises(ValueError, match="no values"):
        _common.percentile([], 50)


def test_summaries_are_the_median_of_runs_with_min_and_max() -> None:
    assert _common.summarize([3.0, 1.0, 10.0]) == {"median": 3.0, "min": 1.0, "max": 10.0, "runs": 3}
    runs = [{"p50": 1.0, "p95": 2.0}, {"p50": 3.0, "p95": 6.0}]
    assert _common.summarize_runs(runs) == {
        "p50": {"median": 2.0, "min": 1.0, "max": 3.0, "runs": 2},
        "p95": {"median": 4.0, "min": 2.0, "max": 6.0, "runs": 2},
    }


def test_a_table_aligns_names_left_and_numbers_right() -> None:
    text = _common.format_table(["name", "ms"], [["a", 1234.5], ["longer", 0.5]])
    lines = text.splitlines()
    assert lines[0] == "name       ms"
    assert lines[2] == "a       1,234"
    assert lines[3] == "longer    0.5"


def test_results_carry_date_machine_commit_and_a_quick_run_keeps_its_own_file(tmp_path: Path) -> None:
    path = _common.write_result(
        "demo", {"x": 1.23456789}, results_dir=tmp_path, quick=True, parameters={"runs": 1}, started=0.0
    )
    assert path == tmp_path / "demo-quick.json"
    document = json.loads(path.read_text())
    assert set(document) == {
        "benchmark",
        "schema",
        "date",
        "quick",
        "machine",
        "git",
        "parameters",
        "results",
        "notes",
        "seconds",
    }
    assert document["results"] == {"x": 1.23457}
    assert document["machine"]["cpu_count"] >= 1 and document["machine"]["python"]
    assert set(document["git"]) == {"commit", "dirty"}
    assert not list(tmp_path.glob("*.tmp"))


# ---- the request counter -----------------------------------------------------------------------------------


def _dynamodb() -> Any:
    return boto3.client("dynamodb", **LOCAL_CLIENT_KWARGS)


def test_the_counter_asks_dynamodb_for_capacity_and_tallies_it_per_operation() -> None:
    counter = RequestCounter()
    client = counter.attach(_dynamodb())
    key = {"pk": {"S": "a"}, "sk": {"S": "b"}}
    with Stubber(client) as stub:
        # The hook adds ReturnConsumedCapacity: the stub insists on exactly these parameters.
        stub.add_response(
            "get_item",
            {"ConsumedCapacity": {"TableName": "t", "CapacityUnits": 1.0}},
            {"TableName": "t", "Key": key, "ConsistentRead": True, "ReturnConsumedCapacity": "INDEXES"},
        )
        stub.add_response(
            "put_item",
            {"ConsumedCapacity": {"TableName": "t", "CapacityUnits": 4.0}},
            {"TableName": "t", "Item": key, "ReturnConsumedCapacity": "INDEXES"},
        )
        stub.add_response(
            "transact_write_items",
            {"ConsumedCapacity": [{"TableName": "t", "CapacityUnits": 10.0}]},
            {
                "TransactItems": [{"Put": {"TableName": "t", "Item": key}}],
                "ReturnConsumedCapacity": "INDEXES",
            },
        )
        stub.add_client_error("put_item", "ConditionalCheckFailedException")
        stub.add_client_error("transact_write_items", "TransactionCanceledException")
        stub.add_response("query", {"Items": [], "Count": 0, "ScannedCount": 0})
        client.get_item(TableName="t", Key=key, ConsistentRead=True)
        client.put_item(TableName="t", Item=key)
        client.transact_write_items(TransactItems=[{"Put": {"TableName": "t", "Item": key}}])
        with pytest.raises(client.exceptions.ConditionalCheckFailedException):
            client.put_item(TableName="t", Item=key, ConditionExpression="attribute_not_exists(pk)")
        with pytest.raises(client.exceptions.TransactionCanceledException):
            client.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": "t", "Item": key}},
                    {"Put": {"TableName": "t", "Item": key}},
                ]
            )
        client.query(
            TableName="t", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "a"}}
        )

    ops = counter.operations()["dynamodb"]
    assert ops["GetItem"]["read_units"] == 1.0
    assert ops["PutItem"] == {
        "calls": 2,
        "errors": 1,
        "billed_requests": 2,
        "read_units": 0.0,
        "write_units": 4.0,
        "estimated_write_units": 1.0,  # the failed condition, billed by AWS, unreported
        "estimated_read_units": 0.0,
        "reported_write_units": 0.0,
    }
    # A transaction is priced from its request (one small item: two units), what was reported kept apart.
    assert ops["TransactWriteItems"]["write_units"] == 2.0
    assert ops["TransactWriteItems"]["reported_write_units"] == 10.0
    assert ops["TransactWriteItems"]["estimated_write_units"] == 4.0  # two items, two units each
    assert ops["Query"]["estimated_read_units"] == 0.5  # an empty, eventually consistent query
    counts = counter.counts()
    assert counts["dynamodb_write_units"] == 11.0
    assert counts["dynamodb_read_units"] == 1.5
    assert counts["dynamodb_requests"] == 6


def test_paused_calls_are_not_counted_and_invocations_bill_started_milliseconds() -> None:
    counter = RequestCounter()
    client = counter.attach(_dynamodb())
    with Stubber(client) as stub:
        stub.add_response("list_tables", {"TableNames": []})
        with counter.paused():
            client.list_tables()
    counter.record_invocation("f", memory_mb=512, seconds=0.0101, records=3)
    counter.record_invocation("f", memory_mb=512, seconds=0.0000001)
    assert counter.operations() == {}
    assert counter.functions() == {
        "f": {"invocations": 2, "billed_ms": 12, "gb_seconds": 0.006, "records": 3}
    }


def test_sqs_and_eventbridge_are_counted_by_64_kb_chunk_and_s3_by_request_class() -> None:
    counter = RequestCounter()
    sqs, events, s3 = (
        counter.attach(boto3.client(s, **LOCAL_CLIENT_KWARGS)) for s in ("sqs", "events", "s3")
    )
    with Stubber(sqs) as stub:
        stub.add_response("send_message", {"MessageId": "m", "MD5OfMessageBody": "x"})
        sqs.send_message(QueueUrl="https://sqs.us-east-1.amazonaws.com/1/q", MessageBody="x" * 100_000)
    with Stubber(events) as stub:
        stub.add_response("put_events", {"FailedEntryCount": 0, "Entries": [{}, {}]})
        small = {"Source": "s", "DetailType": "d", "Detail": "{}"}
        events.put_events(Entries=[small, {**small, "Detail": json.dumps({"x": "y" * 70_000})}])
    with Stubber(s3) as stub:
        stub.add_response("put_object", {})
        stub.add_response("get_object", {})
        stub.add_response("delete_object", {})
        s3.put_object(Bucket="b", Key="k", Body=b"x")
        s3.get_object(Bucket="b", Key="k")
        s3.delete_object(Bucket="b", Key="k")
    counts = counter.counts()
    assert counts["sqs_requests"] == 2  # 100 KB: two chunks
    assert counts["eventbridge_events"] == 3  # one small entry, one of two chunks
    assert (counts["s3_tier1_requests"], counts["s3_tier2_requests"]) == (1, 1)  # DELETE is free


def test_the_counter_gives_exactly_what_the_cost_model_prices() -> None:
    assert set(RequestCounter().counts()) == set(cost.COUNT_KEYS)


# ---- the cost model ----------------------------------------------------------------------------------------


def test_cost_per_million_scales_counts_to_a_million_events_and_prices_each_line() -> None:
    counts = {
        "lambda_invocations": 2,
        "lambda_gb_seconds": 1.0,
        "dynamodb_write_units": 40,
        "dynamodb_read_units": 8,
        "sqs_requests": 3,
        "s3_tier1_requests": 2,
        "s3_tier2_requests": 2,
        "eventbridge_events": 4,
        "log_bytes": 0,
    }
    priced = cost.cost_per_million(counts, 10, xray_sampling=0.5)
    lines = {line["item"]: line["usd_per_million"] for line in priced["lines"]}
    assert lines["Lambda requests"] == pytest.approx(0.2 * 0.2)  # 200,000 invocations per million events
    assert lines["Lambda duration"] == pytest.approx(100_000 * 0.0000166667)
    assert lines["DynamoDB writes"] == pytest.approx(4 * 0.625)
    assert lines["DynamoDB reads"] == pytest.approx(0.8 * 0.125)
    assert lines["SQS requests"] == pytest.approx(0.3 * 0.40)
    assert lines["S3 PUT/LIST"] == pytest.approx(200 * 0.005)
    assert lines["S3 GET"] == pytest.approx(200 * 0.0004)
    assert lines["EventBridge events"] == pytest.approx(0.4)
    assert lines["X-Ray traces"] == pytest.approx(0.1 * 5.0)
    platform_logs_gb = 200_000 * cost.LAMBDA_PLATFORM_LOG_BYTES / 1024**3
    assert lines["CloudWatch Logs"] == pytest.approx(platform_logs_gb * 0.5)
    assert priced["total_usd_per_million"] == pytest.approx(sum(lines.values()))


def test_lambdas_own_lines_are_priced_by_the_templates_system_log_level() -> None:
    def function(logging: dict[str, str]) -> dict[str, object]:
        props = {"Handler": "assetflow.functions.x.lambda_handler", "LoggingConfig": logging}
        return {"Type": "AWS::Lambda::Function", "Properties": props}

    def template(*functions: dict[str, object]) -> dict[str, object]:
        return {"Resources": {f"F{n}": f for n, f in enumerate(functions)}}

    quiet = function({"LogFormat": "JSON", "SystemLogLevel": "WARN"})
    assert cost.platform_log_bytes(template(quiet, quiet)) == 0
    chatty = function({"LogFormat": "JSON", "SystemLogLevel": "INFO"})
    assert cost.platform_log_bytes(template(quiet, chatty)) == cost.LAMBDA_PLATFORM_LOG_BYTES_JSON
    assert cost.platform_log_bytes(template(function({}))) == cost.LAMBDA_PLATFORM_LOG_BYTES
    counts = {"lambda_invocations": 10, "log_bytes": 0}
    lines = {
        bytes_: {
            line["item"]: line
            for line in cost.cost_per_million(counts, 1, platform_log_bytes=bytes_)["lines"]
        }
        for bytes_ in (0, 350)
    }
    assert lines[0]["CloudWatch Logs"]["usd_per_million"] == 0
    assert lines[350]["CloudWatch Logs"]["quantity_per_million"] == pytest.approx(10e6 * 350 / 1024**3)


def test_cost_per_million_refuses_unknown_counts_and_no_events() -> None:
    with pytest.raises(ValueError, match="unknown count keys"):
        cost.cost_per_million({"lambda_invocation": 1}, 1)
    with pytest.raises(ValueError, match="positive"):
        cost.cost_per_million({}, 0)


def test_every_price_names_its_source_and_the_day_it_was_read() -> None:
    for name, price in cost.PRICES.items():
        assert price.source.startswith("https://"), name
        assert price.checked == cost.PRICES_CHECKED, name
        assert price.usd > 0 and price.per > 0, name


def _template() -> dict[str, Any]:
    return {
        "Resources": {
            "Key1": {"Type": "AWS::KMS::Key", "Properties": {"EnableKeyRotation": True}},
            "Key2": {"Type": "AWS::KMS::Key", "Properties": {}},
            **{f"Alarm{i}": {"Type": "AWS::CloudWatch::Alarm", "Properties": {}} for i in range(3)},
            "Queue": {"Type": "AWS::SQS::Queue", "Properties": {}},
            "Table": {"Type": "AWS::DynamoDB::Table", "Properties": {}},
            "FromQueue": {
                "Type": "AWS::Lambda::EventSourceMapping",
                "Properties": {"EventSourceArn": {"Fn::GetAtt": ["Queue", "Arn"]}},
            },
            "FromStream": {
                "Type": "AWS::Lambda::EventSourceMapping",
                "Properties": {"EventSourceArn": {"Fn::GetAtt": ["Table", "StreamArn"]}},
            },
            "FromKafka": {
                "Type": "AWS::Lambda::EventSourceMapping",
                "Properties": {"Topics": ["t"], "ProvisionedPollerConfig": {"MinimumPollers": 2}},
            },
            "OnDemandKafka": {"Type": "AWS::Lambda::EventSourceMapping", "Properties": {"Topics": ["u"]}},
            "Tick": {
                "Type": "AWS::Scheduler::Schedule",
                "Properties": {"ScheduleExpression": "rate(5 minutes)"},
            },
            "Spark": {"Type": "AWS::EMRServerless::Application", "Properties": {"InitialCapacity": [{}]}},
            "Thing": {"Type": "AWS::Made::Up", "Properties": {}},
        }
    }


def test_idle_cost_prices_what_runs_with_no_traffic_and_lists_what_it_cannot_price() -> None:
    idle = cost.idle_cost_per_day(_template())
    lines = {line["item"]: line for line in idle["lines"]}
    month = cost.DAYS_PER_MONTH
    assert lines["KMS keys"]["usd_per_day"] == pytest.approx(2 / month)
    assert lines["CloudWatch alarms"]["usd_per_day"] == pytest.approx(0.3 / month)
    assert lines["Kafka pollers (provisioned mode)"]["count"] == 2  # the on-demand mapping costs nothing idle
    assert lines["Kafka pollers (provisioned mode)"]["usd_per_day"] == pytest.approx(2 * 24 * 0.185)
    assert lines["SQS pollers' empty receives"]["usd_per_day"] == pytest.approx(15 * 60 * 24 * 0.4 / 1e6)
    assert lines["DynamoDB stream pollers"]["usd_per_day"] == 0
    assert lines["Scheduler schedules"]["usd_per_day"] == pytest.approx(288 / 1e6)
    assert idle["usd_per_day"] == pytest.approx(sum(line["usd_per_day"] for line in idle["lines"]))
    assert "AWS::Made::Up" in idle["unpriced"]
    assert any("InitialCapacity" in entry for entry in idle["unpriced"])


@pytest.mark.parametrize(
    ("expression", "per_day"),
    [
        ("cron(0 6 * * ? *)", 1.0),
        ("cron(0/15 * * * ? *)", 96.0),
        ("rate(1 hour)", 24.0),
        ("at(2026-01-01T00:00:00)", 0),
    ],
)
def test_schedule_expressions_fire_so_many_times_a_day(expression: str, per_day: float) -> None:
    assert cost._schedule_runs_per_day(expression) == pytest.approx(per_day)


def test_stored_items_are_sized_by_kind_with_their_index_copies() -> None:
    event = {"pk": {"S": "ASSET#a"}, "sk": {"S": "EVENT#t#1"}, "event": {"S": "x" * 100}}
    run = {"pk": {"S": "RUN#r"}, "sk": {"S": "#RUN"}, "gsi1pk": {"S": "R"}, "gsi2pk": {"S": "R"}}
    assert cost.item_kind(event) == "event" and cost.item_kind(run) == "run"
    assert cost.stored_bytes(event) == (2 + 7 + 2 + 9 + 5 + 100) + 100
    assert cost.stored_bytes(run) == ((2 + 5 + 2 + 4 + 6 + 1 + 6 + 1) + 100) * 3
    storage = cost.storage_per_million({"event": 1024**3 / 1e6, "dedupe": 1024**3 / 1e6}, 1)
    assert storage["kept_gb_per_million"] == pytest.approx(1.0)
    assert storage["transient_gb_per_million"] == pytest.approx(1.0)
    assert storage["usd_per_month_per_million"] == pytest.approx(0.25 + 0.20)


# ---- the evaluator benchmark's catalogs and the prototype fix ------------------------------------------------


def test_catalogs_of_every_size_reach_the_same_three_pipelines() -> None:
    for size in (10, 200):
        catalog = evaluator_scale.catalog_of(evaluator_scale.pipelines_of(size))
        assert len(catalog.pipelines) == size
        assert [p.id for p, _ in catalog.consumers(evaluator_scale.HOT["a"].uri)] == [
            "hot_both",
            "hot_single",
        ]
        assert Catalog.build(evaluator_scale.pipelines_of(size)).to_document() == catalog.to_document()


def test_the_proposed_loop_check_finds_what_the_current_one_finds() -> None:
    x, y, z, p = (Asset(f"x-test://{n}") for n in "xyzp")
    alias = AssetAlias("maybe")
    pipelines = {
        # a loop through outlets alone, a loop only through an alias, a partitioned pipeline that the
        # non-partitioned loop does not feed, and a pipeline fed from outside
        "loop_a": Pipeline("loop_a", schedule=x, job=JOB, outlets=[y]),
        "loop_b": Pipeline("loop_b", schedule=y, job=JOB, outlets=[x]),
        "via_alias": Pipeline("via_alias", schedule=alias, job=JOB, outlets=[alias]),
        "partitioned": Pipeline(
            "partitioned", schedule=PartitionedAssetSchedule(y, mapper=DailyMapper()), job=JOB, outlets=[p]
        ),
        "fed": Pipeline("fed", schedule=z & x, job=JOB, outlets=[p]),
    }
    for with_aliases in (False, True):
        expected = Catalog._self_sustaining(pipelines, with_aliases)
        assert evaluator_scale.self_sustaining_proposed(pipelines, with_aliases) == expected
    assert Catalog._self_sustaining(pipelines, False) == {"loop_a", "loop_b"}
    assert Catalog._self_sustaining(pipelines, True) == {"loop_a", "loop_b", "via_alias"}


def test_a_transaction_is_priced_from_its_items_sizes_and_index_entries() -> None:
    from benchmarks._counting import transaction_write_units

    small = {"pk": {"S": "a"}, "sk": {"S": "b"}}
    big = {**small, "v": {"S": "x" * 1500}}
    indexed = {
        **small,
        "gsi1pk": {"S": "RUNS#p"},
        "gsi1sk": {"S": "t#r"},
        "gsi3pk": {"S": "U#p"},
        "gsi3sk": {"S": "t"},
    }
    assert transaction_write_units([{"Put": {"Item": small}}] * 5) == 10.0  # DynamoDB Local says 2
    assert transaction_write_units([{"Put": {"Item": big}}]) == 4.0  # 1.5 KB: two KB, twice
    assert transaction_write_units([{"Put": {"Item": indexed}}]) == 4.0  # the item, twice; two index entries
    removes = {"Key": small, "UpdateExpression": "SET job_run_id = :j REMOVE gsi3pk, gsi3sk"}
    assert transaction_write_units([{"Update": removes}, {"Delete": {"Key": small}}]) == 5.0


def test_an_update_expression_names_the_attributes_it_changes() -> None:
    from benchmarks._counting import updated_attributes

    expression = (
        "SET #s = :new, job_run_id = if_not_exists(job_run_id, :j), ended_at = if_not_exists(ended_at, :e) "
        "REMOVE gsi3pk, gsi3sk ADD attempts :one"
    )
    assert updated_attributes(expression, {"#s": "state"}) == [
        "attempts",
        "ended_at",
        "gsi3pk",
        "gsi3sk",
        "job_run_id",
        "state",
    ]
    assert updated_attributes("ADD event_count :k") == ["event_count"]


def test_write_units_are_told_apart_by_what_each_write_wrote() -> None:
    counter = RequestCounter()
    client = counter.attach(_dynamodb())
    run_key = {"pk": {"S": "RUN#r1"}, "sk": {"S": "#RUN"}}
    seen = {"pk": {"S": "QUEUE#p#"}, "sk": {"S": "SEEN#e1"}}
    event = {"pk": {"S": "ASSET#s3://b/k"}, "sk": {"S": "EVENT#t#e1"}}
    marking = {
        "TableName": "t",
        "Key": run_key,
        "UpdateExpression": "SET job_run_id = :j, gsi3pk = :a",
        "ExpressionAttributeValues": {":j": {"S": "j1"}, ":a": {"S": "ACTIVE#01"}},
    }
    transaction = [
        {"Put": {"TableName": "t", "Item": {**run_key, "gsi1pk": {"S": "RUNS#p"}, "gsi1sk": {"S": "t#r1"}}}},
        {"Put": {"TableName": "t", "Item": seen}},
    ]
    batch = {
        "t": [{"PutRequest": {"Item": event}}, {"PutRequest": {"Item": {**event, "sk": {"S": "EVENT#u#e2"}}}}]
    }
    with Stubber(client) as stub:
        stub.add_response("update_item", {"ConsumedCapacity": {"TableName": "t", "CapacityUnits": 3.0}})
        stub.add_response("update_item", {"ConsumedCapacity": {"TableName": "t", "CapacityUnits": 3.0}})
        stub.add_response(
            "transact_write_items", {"ConsumedCapacity": [{"TableName": "t", "CapacityUnits": 2.0}]}
        )
        stub.add_response(
            "batch_write_item", {"ConsumedCapacity": [{"TableName": "t", "CapacityUnits": 2.0}]}
        )
        stub.add_client_error("put_item", "ConditionalCheckFailedException")
        client.update_item(**marking)
        client.update_item(**marking)
        client.transact_write_items(TransactItems=transaction)
        client.batch_write_item(RequestItems=batch)
        with pytest.raises(client.exceptions.ConditionalCheckFailedException):
            client.put_item(TableName="t", Item=seen, ConditionExpression="attribute_not_exists(pk)")

    writes = counter.writes()
    assert writes == {
        "UpdateItem run (gsi3pk, job_run_id)": {"writes": 2, "write_units": 6.0},
        "Put run in a transaction": {"writes": 1, "write_units": 3.0},  # two units, one index entry
        "BatchWriteItem (Put event)": {"writes": 1, "write_units": 2.0},
        "Put seen in a transaction": {"writes": 1, "write_units": 2.0},
        "PutItem seen": {"writes": 1, "write_units": 1.0},  # failed its condition: estimated, as AWS bills it
    }
    # The same units as the operations' tallies, split by what was written.
    assert sum(w["write_units"] for w in writes.values()) == counter.counts()["dynamodb_write_units"]
    assert list(counter.snapshot()["writes"]) == list(writes)
