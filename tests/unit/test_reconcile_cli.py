"""``assetflow reconcile``'s probes: one per watcher the environment can reach, the rest said, not dropped."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from assetflow import Asset, AssetWatcher, Catalog, KafkaTopic, SqsQueue
from assetflow_dev.operate import _Environment, _probes
from assetflow_dev.replay import FailureSources
from assetflow_dev.sources import KafkaProbe, SqsDeadLetterProbe

ARN = "arn:aws:sqs:us-east-1:123456789012:orders"
MSK = "arn:aws:kafka:us-east-1:123456789012:cluster/local/0"
CATALOG = Catalog.build(
    [
        Asset("x-test://orders", watchers=[AssetWatcher("orders", SqsQueue("orders"))]),
        Asset("x-test://readings", watchers=[AssetWatcher("readings", KafkaTopic("readings"))]),
    ]
)


def environment(functions: dict[str, str]) -> _Environment:
    sources = FailureSources(
        functions=functions, dead_letter_queues={"orders": ("http://sqs/orders-dlq", ARN)}
    )
    return _Environment(sources, lambda_client=None, s3=None, sqs=object(), streams=None, where="here")


def test_local_probes_name_each_source_as_its_ingest_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".assetflow").mkdir()
    dev: dict[str, Any] = {
        "endpoints": {"kafka": "127.0.0.1:9092"},
        "topics": {"readings": {"topic": "readings", "group_id": "g", "event_source_arn": MSK}},
    }
    (tmp_path / ".assetflow" / "dev.json").write_text(json.dumps(dev))
    env = environment({"ingest-orders": "fn-orders", "ingest-readings": "fn-readings"})
    probes, skipped = _probes(argparse.Namespace(env=None), env, CATALOG)
    assert skipped == []
    kafka, sqs = sorted(probes, key=lambda p: p.kind)
    assert isinstance(kafka, KafkaProbe) and kafka.source == f"kafka:{MSK}:readings"
    assert (kafka.group_id, kafka.function) == ("g", "fn-readings")
    assert isinstance(sqs, SqsDeadLetterProbe) and sqs.source == f"sqs:{ARN}" and sqs.function == "fn-orders"


def test_a_deployed_environment_says_which_sources_it_cannot_reach() -> None:
    env = environment({"ingest-orders": "fn-orders"})
    probes, skipped = _probes(argparse.Namespace(env="prod"), env, CATALOG)
    assert [p.watcher for p in probes] == ["orders"]
    assert skipped == ["readings: no ingest function in here"]
    env = environment({"ingest-orders": "fn-orders", "ingest-readings": "fn-readings"})
    _, skipped = _probes(argparse.Namespace(env="prod"), env, CATALOG)
    assert skipped == ["readings: the Kafka brokers are reachable from the local runtime only"]


def test_an_s3_watcher_is_probed_by_its_dead_letters_first_then_by_its_prefix() -> None:
    from assetflow import S3ObjectCreated
    from assetflow_dev.sources import S3PrefixProbe

    landing = "arn:aws:sqs:us-east-1:123456789012:landing-events"
    catalog = Catalog.build(
        [
            Asset(
                "x-test://landing",
                watchers=[AssetWatcher("landing", S3ObjectCreated("landing-bucket", "in/", ".csv"))],
            )
        ]
    )
    sources = FailureSources(
        functions={"ingest-landing": "fn-landing"},
        dead_letter_queues={"landing": ("http://sqs/landing-dlq", landing)},
    )
    env = _Environment(sources, lambda_client=None, s3=object(), sqs=object(), streams=None, where="here")
    store = object()
    # Deployed too: a listing works from anywhere the operator's credentials reach the bucket
    probes, skipped = _probes(argparse.Namespace(env="prod"), env, catalog, events=store)
    assert skipped == []
    dead_letters, prefix = probes
    assert isinstance(dead_letters, SqsDeadLetterProbe) and dead_letters.watcher == "landing"
    assert isinstance(prefix, S3PrefixProbe)
    assert (prefix.watcher, prefix.kind, prefix.source) == ("landing", "s3", "s3:landing-bucket/in/")
    assert (prefix.asset, prefix.function, prefix.queue_arn) == ("x-test://landing", "fn-landing", landing)
    assert prefix.watched.suffix == ".csv"
