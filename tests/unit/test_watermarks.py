"""Watermarks in the core: the position a recorded message sets, a batch's newest, and the gaps to replay."""

from __future__ import annotations

from assetflow.core.watermarks import Gap, Watermark, kafka_gaps, kafka_source, newest, position_of

MSK = "arn:aws:kafka:us-east-1:1:cluster/c/0"
QUEUE = "arn:aws:sqs:us-east-1:1:orders"


def test_a_kafka_identity_sets_its_partitions_offset_and_an_sqs_one_its_sent_time() -> None:
    mark = position_of(f"kafka:{MSK}:readings:3:41:1763719500000")
    assert mark == Watermark(
        kafka_source(MSK, "readings"), "3", 41, f"kafka:{MSK}:readings:3:41:1763719500000", first=41
    )
    sqs = position_of(f"sqs:{QUEUE}:m-1", {"attributes": {"SentTimestamp": "1763719200123"}})
    assert sqs is not None and (sqs.source, sqs.partition, sqs.position) == (
        f"sqs:{QUEUE}",
        "",
        1763719200123,
    )
    # What has no position sets none: malformed records, SQS records without a sent time or message id
    assert position_of(f"kafka:{MSK}:readings:None:None:-:malformed:ab") is None
    assert position_of(f"sqs:{QUEUE}:m-1", {"attributes": {}}) is None
    assert position_of(f"sqs:{QUEUE}:no-message-id:ab", {"attributes": {"SentTimestamp": "1"}}) is None
    assert position_of("api#x") is None


def test_a_batch_moves_each_partition_to_its_newest_offset_from_its_lowest() -> None:
    source = kafka_source(MSK, "t")
    marks = [Watermark(source, p, o, f"m{o}", first=o) for p, o in (("0", 5), ("0", 7), ("1", 2), ("0", 6))]
    assert [(m.partition, m.first, m.position, m.message) for m in newest(marks)] == [
        ("0", 5, 7, "m7"),
        ("1", 2, 2, "m2"),
    ]


def test_gaps_run_from_what_was_recorded_through_to_what_the_group_committed() -> None:
    source = kafka_source(MSK, "t")
    gaps = kafka_gaps(source, {"0": 4, "1": 9}, {"0": 8, "1": 10, "2": 3}, start={"2": 1})
    assert gaps == [Gap(source, "0", 5, 7), Gap(source, "2", 1, 2)]  # partition 1 is caught up
    assert gaps[0].to_json() == {"source": source, "partition": "0", "first": 5, "last": 7, "size": 3}
    assert Watermark(source, "0", 9, "m", contiguous=4).recorded_through == 4
    assert Watermark(source, "0", 9, "m").recorded_through == 9
