"""Asset watchers and their message sources (SQS queues, Kafka topics): validation and documents."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from assetflow import (
    AssetWatcher,
    DefinitionError,
    KafkaTopic,
    MessageQueueTrigger,
    MskCluster,
    SelfManagedKafka,
    SqsQueue,
)
from assetflow.core.errors import DocumentError
from assetflow.core.watchers import source_from_json

QUEUE_ARN = "arn:aws:sqs:eu-west-1:123456789012:orders"
FIFO_ARN = "arn:aws:sqs:eu-west-1:123456789012:orders.fifo"
MSK_ARN = "arn:aws:kafka:eu-west-1:123456789012:cluster/events/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0-3"


# --- SqsQueue: which queue ----------------------------------------------------------------------


def test_sqs_queue_by_name() -> None:
    queue = SqsQueue("orders")
    assert queue.queue_name == "orders"
    assert queue.arn is None
    assert queue.fifo is False
    assert (queue.batch_size, queue.max_batching_window_seconds) == (10, 0)


def test_sqs_queue_by_arn_takes_the_name_from_the_arn() -> None:
    queue = SqsQueue(arn=QUEUE_ARN)
    assert queue.queue_name == "orders"
    assert queue.name is None
    assert queue.fifo is False


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws-cn:sqs:cn-north-1:123456789012:orders",
        "arn:aws-us-gov:sqs:us-gov-west-1:123456789012:orders",
    ],
)
def test_sqs_arn_of_other_partitions(arn: str) -> None:
    assert SqsQueue(arn=arn).queue_name == "orders"


@pytest.mark.parametrize("kwargs", [{}, {"name": "orders", "arn": QUEUE_ARN}])
def test_sqs_queue_needs_exactly_one_of_name_and_arn(kwargs: dict[str, Any]) -> None:
    with pytest.raises(DefinitionError, match=r"exactly one of name= .* or arn="):
        SqsQueue(**kwargs)


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:sns:eu-west-1:123456789012:orders",
        "arn:aws:sqs:eu-west-1:12345:orders",
        "arn:aws:sqs:eu-west-1:123456789012:",
        "https://sqs.eu-west-1.amazonaws.com/123456789012/orders",
        "arn:aws:sqs:eu-west-1:123456789012:bad name",
    ],
)
def test_sqs_arn_must_be_a_queue_arn(arn: str) -> None:
    with pytest.raises(DefinitionError, match="not an SQS queue ARN"):
        SqsQueue(arn=arn)


@pytest.mark.parametrize("name", ["", "has space", "dots.are.bad", "x" * 81, "ünï", "q.fifo.fifo"])
def test_sqs_queue_name_rules(name: str) -> None:
    with pytest.raises(DefinitionError, match="a queue name has 1-80 characters"):
        SqsQueue(name)


def test_sqs_fifo_name_of_80_characters_is_accepted() -> None:
    name = "x" * 75 + ".fifo"
    assert SqsQueue(name).queue_name == name


def test_sqs_standard_name_of_80_characters_is_accepted() -> None:
    assert SqsQueue("x" * 80).queue_name == "x" * 80
    assert SqsQueue(arn="arn:aws:sqs:eu-west-1:123456789012:" + "x" * 80).queue_name == "x" * 80


# --- SqsQueue: FIFO -----------------------------------------------------------------------------


def test_fifo_is_inferred_from_the_name() -> None:
    assert SqsQueue("orders.fifo").fifo is True
    assert SqsQueue(arn=FIFO_ARN).fifo is True
    assert SqsQueue("orders").fifo is False


def test_explicit_fifo_matching_the_name_is_accepted() -> None:
    assert SqsQueue("orders.fifo", fifo=True).fifo is True
    assert SqsQueue("orders", fifo=False).fifo is False


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": "orders", "fifo": True},
        {"name": "orders.fifo", "fifo": False},
        {"arn": QUEUE_ARN, "fifo": True},
    ],
)
def test_fifo_flag_must_match_the_name(kwargs: dict[str, Any]) -> None:
    with pytest.raises(DefinitionError, match=r"FIFO queue names end in '\.fifo'"):
        SqsQueue(**kwargs)


# --- SqsQueue: batching -------------------------------------------------------------------------


@pytest.mark.parametrize(("size", "window"), [(1, 0), (10, 0), (11, 1), (10_000, 300), (500, 20)])
def test_standard_queue_batch_sizes(size: int, window: int) -> None:
    queue = SqsQueue("orders", batch_size=size, max_batching_window_seconds=window)
    assert (queue.batch_size, queue.max_batching_window_seconds) == (size, window)


@pytest.mark.parametrize("size", [0, -1, 10_001])
def test_standard_queue_batch_size_limits(size: int) -> None:
    with pytest.raises(DefinitionError, match="batch_size must be between 1 and 10000"):
        SqsQueue("orders", batch_size=size, max_batching_window_seconds=1)


@pytest.mark.parametrize("size", [0, 11, 100])
def test_fifo_queue_batch_size_limit_is_ten(size: int) -> None:
    with pytest.raises(DefinitionError, match="batch_size must be between 1 and 10 for this queue type"):
        SqsQueue("orders.fifo", batch_size=size)


def test_fifo_queue_batch_of_ten() -> None:
    assert SqsQueue("orders.fifo", batch_size=10).batch_size == 10


def test_batch_above_ten_needs_a_batching_window() -> None:
    with pytest.raises(
        DefinitionError, match="batch_size above 10 needs max_batching_window_seconds of at least 1"
    ):
        SqsQueue("orders", batch_size=11)


@pytest.mark.parametrize("window", [-1, 301])
def test_batching_window_limits(window: int) -> None:
    with pytest.raises(DefinitionError, match="max_batching_window_seconds must be between 0 and 300"):
        SqsQueue("orders", max_batching_window_seconds=window)


def test_fifo_queue_has_no_batching_window() -> None:
    with pytest.raises(DefinitionError, match="FIFO queues do not support a batching window"):
        SqsQueue("orders.fifo", max_batching_window_seconds=5)


# --- filter, schema, partition key (both source types) ------------------------------------------


@pytest.mark.parametrize(
    "make", [lambda **kw: SqsQueue("orders", **kw), lambda **kw: KafkaTopic("orders", **kw)]
)
def test_filter_is_validated_and_frozen(make: Any) -> None:
    pattern = {"kind": ["order"], "meta": {"region": [{"prefix": "eu-"}]}}
    source = make(filter=pattern)
    pattern["kind"].append("refund")

    assert source.filter["kind"] == ("order",)
    assert source.to_json()["filter"] == {"kind": ["order"], "meta": {"region": [{"prefix": "eu-"}]}}
    with pytest.raises(TypeError):
        source.filter["kind"] = ["x"]


@pytest.mark.parametrize(
    "make", [lambda **kw: SqsQueue("orders", **kw), lambda **kw: KafkaTopic("orders", **kw)]
)
def test_invalid_filter_names_the_source(make: Any) -> None:
    with pytest.raises(DefinitionError, match=r"\('orders'\) filter\.kind: expected a list"):
        make(filter={"kind": "order"})


@pytest.mark.parametrize("schema", [{}, ["type", "object"], "object"])
def test_schema_must_be_a_non_empty_dict(schema: Any) -> None:
    with pytest.raises(DefinitionError, match="schema must be a JSON Schema given as a non-empty dict"):
        SqsQueue("orders", schema=schema)
    with pytest.raises(DefinitionError, match="schema must be a JSON Schema"):
        KafkaTopic("orders", schema=schema)


def test_schema_is_frozen() -> None:
    schema = {"type": "object", "required": ["id"]}
    queue = SqsQueue("orders", schema=schema)
    schema["required"].append("other")
    assert queue.schema["required"] == ("id",)
    assert queue.to_json()["schema"] == {"type": "object", "required": ["id"]}


@pytest.mark.parametrize("field", ["day", "meta.day", "a.b-c.d_e", "x1"])
def test_partition_key_field_paths(field: str) -> None:
    assert SqsQueue("orders", partition_key_field=field).partition_key_field == field
    assert KafkaTopic("orders", partition_key_field=field).partition_key_field == field


@pytest.mark.parametrize("field", ["", ".day", "meta.", "meta..day", "meta day", "$.day", 3])
def test_partition_key_field_must_be_a_dotted_path(field: Any) -> None:
    with pytest.raises(DefinitionError, match="partition_key_field must be a dotted path"):
        SqsQueue("orders", partition_key_field=field)


# --- Kafka ------------------------------------------------------------------------------------


def test_kafka_topic_defaults() -> None:
    topic = KafkaTopic("sensor-readings")
    assert topic.cluster is None
    assert topic.starting_position == "LATEST"
    assert topic.batch_size == 100
    assert topic.consumer_group_id is None


@pytest.mark.parametrize("name", ["a", "sensor.readings_v2-eu", "x" * 249])
def test_kafka_topic_names_accepted(name: str) -> None:
    assert KafkaTopic(name).topic == name


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "has space", "a/b", "tøpic", None])
def test_kafka_topic_names_refused(name: Any) -> None:
    with pytest.raises(DefinitionError, match="a topic name has 1-249 characters"):
        KafkaTopic(name)


def test_msk_cluster_arn() -> None:
    assert KafkaTopic("t", cluster=MskCluster(MSK_ARN)).cluster == MskCluster(MSK_ARN)


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:kafka:eu-west-1:123456789012:topic/events/abc",
        "arn:aws:kafka:eu-west-1:123:cluster/events/abc",
        "arn:aws:sqs:eu-west-1:123456789012:cluster/events/abc",
        "events",
    ],
)
def test_msk_cluster_arn_refused(arn: str) -> None:
    with pytest.raises(DefinitionError, match="is not an MSK cluster ARN"):
        MskCluster(arn)


def test_self_managed_servers() -> None:
    cluster = SelfManagedKafka(["b-1.kafka.internal:9092", "10.0.0.7:9094"])  # type: ignore[arg-type]
    assert cluster.bootstrap_servers == ("b-1.kafka.internal:9092", "10.0.0.7:9094")
    assert SelfManagedKafka("localhost:9092").bootstrap_servers == ("localhost:9092",)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "servers", [(), ("localhost",), ("localhost:port",), ("http://broker:9092",), ("a:1", "b")]
)
def test_self_managed_servers_must_be_host_port(servers: tuple[str, ...]) -> None:
    with pytest.raises(DefinitionError, match="bootstrap servers must be host:port"):
        SelfManagedKafka(servers)


@pytest.mark.parametrize("server", ["broker:0", "broker:65536", "broker:99999"])
def test_self_managed_port_must_be_a_tcp_port(server: str) -> None:
    with pytest.raises(DefinitionError):
        SelfManagedKafka((server,))


def test_kafka_cluster_type_is_checked() -> None:
    with pytest.raises(DefinitionError, match=r"cluster must be MskCluster\(...\) or SelfManagedKafka"):
        KafkaTopic("t", cluster=MSK_ARN)  # type: ignore[arg-type]


@pytest.mark.parametrize("position", ["LATEST", "TRIM_HORIZON"])
def test_starting_positions(position: Any) -> None:
    assert KafkaTopic("t", starting_position=position).starting_position == position


@pytest.mark.parametrize("position", ["AT_TIMESTAMP", "latest", "EARLIEST"])
def test_other_starting_positions_refused(position: Any) -> None:
    with pytest.raises(DefinitionError, match="starting_position is 'LATEST' or 'TRIM_HORIZON'"):
        KafkaTopic("t", starting_position=position)


@pytest.mark.parametrize("size", [0, 10_001])
def test_kafka_batch_size_limits(size: int) -> None:
    with pytest.raises(DefinitionError, match="batch_size must be between 1 and 10000"):
        KafkaTopic("t", batch_size=size)
    assert KafkaTopic("t", batch_size=10_000).batch_size == 10_000


@pytest.mark.parametrize("group", ["", "has space", "x" * 201, "grüppe"])
def test_consumer_group_id_rules(group: str) -> None:
    with pytest.raises(DefinitionError, match="consumer_group_id has 1-200"):
        KafkaTopic("t", consumer_group_id=group)
    assert (
        KafkaTopic("t", consumer_group_id="assetflow.readings_1").consumer_group_id == "assetflow.readings_1"
    )


# --- AssetWatcher -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["w", "deliveries", "sensor-readings.v2_eu", "0start", "x" * 64])
def test_watcher_names_accepted(name: str) -> None:
    assert AssetWatcher(name, SqsQueue("q")).name == name


@pytest.mark.parametrize("name", ["", "-start", ".start", "_start", "x" * 65, "has space", "wätcher", None])
def test_watcher_names_refused(name: Any) -> None:
    with pytest.raises(DefinitionError, match="1-64 characters of letters, digits"):
        AssetWatcher(name, SqsQueue("q"))


def test_watcher_source_type_is_checked() -> None:
    with pytest.raises(
        DefinitionError,
        match=r"source must be SqsQueue\(...\), KafkaTopic\(...\), S3ObjectCreated\(...\), EventBridgePattern\(...\) or KinesisStream\(...\), not str",
    ):
        AssetWatcher("w", "orders")  # type: ignore[arg-type]


def test_watchers_are_frozen() -> None:
    watcher = AssetWatcher("w", SqsQueue("q"))
    with pytest.raises(AttributeError):
        watcher.name = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        watcher.source.batch_size = 5  # type: ignore[misc]


def test_watchers_with_a_schema_are_hashable() -> None:
    watcher = AssetWatcher("w", SqsQueue("q", schema={"type": "object"}, filter={"k": ["v"]}))
    assert hash(watcher) == hash(
        AssetWatcher("w", SqsQueue("q", schema={"type": "object"}, filter={"k": ["v"]}))
    )


# --- documents ----------------------------------------------------------------------------------


def test_sqs_document_shape() -> None:
    queue = SqsQueue(
        "orders",
        batch_size=50,
        max_batching_window_seconds=5,
        filter={"kind": ["order"]},
        schema={"type": "object"},
        partition_key_field="meta.day",
    )
    assert queue.to_json() == {
        "type": "sqs",
        "queue": "orders",
        "queue_arn": None,
        "fifo": False,
        "batch_size": 50,
        "max_batching_window_seconds": 5,
        "filter": {"kind": ["order"]},
        "schema": {"type": "object"},
        "partition_key_field": "meta.day",
    }


def test_kafka_document_shape() -> None:
    topic = KafkaTopic(
        "t", cluster=SelfManagedKafka(("b:9092",)), consumer_group_id="g", starting_position="TRIM_HORIZON"
    )
    assert topic.to_json() == {
        "type": "kafka",
        "topic": "t",
        "cluster": {"type": "self_managed", "bootstrap_servers": ["b:9092"]},
        "consumer_group_id": "g",
        "starting_position": "TRIM_HORIZON",
        "batch_size": 100,
        "filter": None,
        "schema": None,
        "partition_key_field": None,
    }
    assert KafkaTopic("t", cluster=MskCluster(MSK_ARN)).to_json()["cluster"] == {
        "type": "msk",
        "cluster_arn": MSK_ARN,
    }


@pytest.mark.parametrize(
    "source",
    [
        SqsQueue("orders"),
        SqsQueue(arn=FIFO_ARN, batch_size=5),
        SqsQueue(
            "orders", batch_size=200, max_batching_window_seconds=30, filter={"a": [{"numeric": [">", 1]}]}
        ),
        SqsQueue("orders", schema={"type": "object", "required": ["id"]}, partition_key_field="id"),
        KafkaTopic("t"),
        KafkaTopic("t", cluster=MskCluster(MSK_ARN), consumer_group_id="g", starting_position="TRIM_HORIZON"),
        KafkaTopic(
            "t", cluster=SelfManagedKafka(("a:1", "b:2")), batch_size=5_000, filter={"x": [{"exists": True}]}
        ),
    ],
    ids=lambda s: type(s).__name__,
)
def test_source_round_trip(source: SqsQueue | KafkaTopic) -> None:
    assert source_from_json(source.to_json()) == source


@pytest.mark.parametrize(
    "doc",
    [
        {"type": "sns"},
        {"type": "sqs"},
        {"type": "kafka", "topic": "t"},
        {**SqsQueue("orders").to_json(), "batch_size": 0},
        {**KafkaTopic("t").to_json(), "cluster": {"type": "msk", "cluster_arn": "nope"}},
        {**KafkaTopic("t").to_json(), "cluster": "default"},
        {},
    ],
)
def test_source_from_json_refuses_bad_documents(doc: dict[str, Any]) -> None:
    with pytest.raises(DocumentError):
        source_from_json(doc)


# --- Airflow's MessageQueueTrigger ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("trigger", "source"),
    [
        (
            MessageQueueTrigger(queue="https://sqs.us-east-1.amazonaws.com/123456789012/my-queue"),
            SqsQueue(arn="arn:aws:sqs:us-east-1:123456789012:my-queue"),
        ),
        (
            MessageQueueTrigger(queue="https://sqs.cn-north-1.amazonaws.com.cn/123456789012/orders.fifo"),
            SqsQueue(arn="arn:aws-cn:sqs:cn-north-1:123456789012:orders.fifo"),
        ),
        (
            MessageQueueTrigger(queue="https://eu-west-1.queue.amazonaws.com/123456789012/legacy"),
            SqsQueue(arn="arn:aws:sqs:eu-west-1:123456789012:legacy"),
        ),
        (
            MessageQueueTrigger(queue="arn:aws:sqs:us-east-1:123456789012:my-queue", batch_size=5),
            SqsQueue(arn="arn:aws:sqs:us-east-1:123456789012:my-queue", batch_size=5),
        ),
        (
            MessageQueueTrigger(queue="sqs://orders", filter={"kind": ["order"]}),
            SqsQueue("orders", filter={"kind": ["order"]}),
        ),
        (
            MessageQueueTrigger(
                scheme="sqs",
                sqs_queue="https://sqs.us-east-1.amazonaws.com/123456789012/q",
                aws_conn_id="aws_default",
                waiter_delay=30,
            ),
            SqsQueue(arn="arn:aws:sqs:us-east-1:123456789012:q"),
        ),
        (
            MessageQueueTrigger(queue="kafka://broker-1:9092,broker-2:9092/readings"),
            KafkaTopic("readings", cluster=SelfManagedKafka(("broker-1:9092", "broker-2:9092"))),
        ),
        (
            MessageQueueTrigger(
                scheme="kafka", topics=["readings"], kafka_config_id="kafka_default", poll_interval=5
            ),
            KafkaTopic("readings"),
        ),
        (
            MessageQueueTrigger(
                scheme="kafka", topics="readings", partition_key_field="day", queue="triggerer-a"
            ),
            KafkaTopic("readings", partition_key_field="day"),
        ),
    ],
    ids=repr,
)
def test_message_queue_triggers_map_onto_sources(trigger: MessageQueueTrigger, source: Any) -> None:
    assert trigger.source == source
    watcher = AssetWatcher("w", trigger=trigger)
    assert watcher == AssetWatcher("w", source)
    assert copy.deepcopy(watcher) == watcher


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "needs queue= .* or scheme="),
        ({"scheme": "redis+pubsub", "channels": ["x"]}, "scheme 'redis\\+pubsub' is not supported"),
        ({"queue": "redis+pubsub://h:6379/c"}, "is not an SQS queue"),
        ({"queue": "http://127.0.0.1:5000/123456789012/q"}, "does not say its region"),
        ({"queue": "kafka://b:9092/t1,t2"}, "2 topics .* give each topic its own AssetWatcher"),
        ({"scheme": "kafka"}, "topics must be a topic name"),
        ({"scheme": "sqs"}, "needs sqs_queue="),
        (
            {"scheme": "kafka", "topics": ["t"], "apply_function": "mod.f"},
            "apply_function= has no assetflow equivalent",
        ),
        ({"queue": "sqs://q", "message_filtering": "jsonpath"}, "use filter="),
        ({"queue": "sqs://q", "poll_mode": "fast"}, "poll_mode is not a setting of an assetflow SQS source"),
        (
            {"scheme": "kafka", "topics": ["t"], "fifo": True},
            "fifo is not a setting of an assetflow Kafka source",
        ),
        ({"queue": 5}, "queue must be a string"),
    ],
)
def test_message_queue_triggers_that_cannot_map_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        MessageQueueTrigger(**kwargs)


def test_a_watcher_takes_a_source_or_a_trigger() -> None:
    trigger = MessageQueueTrigger(queue="sqs://orders")
    with pytest.raises(DefinitionError, match="a source or a trigger, not both"):
        AssetWatcher("w", SqsQueue("orders"), trigger=trigger)
    with pytest.raises(DefinitionError, match="trigger must be a MessageQueueTrigger"):
        AssetWatcher("w", trigger="sqs://orders")  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match="source must be SqsQueue"):
        AssetWatcher("w")
    assert repr(trigger) == "MessageQueueTrigger(queue='sqs://orders')"
