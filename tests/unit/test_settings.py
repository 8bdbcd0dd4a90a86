"""The functions' settings, read from their environment: what is required, what must be JSON, how it fails."""

from __future__ import annotations

import pytest

from assetflow.composition import Settings, SettingsError

BASE = {"TABLE_NAME": "events", "CATALOG_PATH": "/var/task/catalog.json"}


def test_the_required_variables_are_named_when_missing() -> None:
    with pytest.raises(SettingsError, match="missing environment variables: TABLE_NAME, CATALOG_PATH"):
        Settings.from_env({})


def test_json_settings_are_read_as_objects_and_unset_ones_are_none() -> None:
    settings = Settings.from_env(
        BASE
        | {
            "ASSETFLOW_PATH_MAP": '{"s3://lake": "/data/lake"}',
            "ASSETFLOW_EVENT_SHARDS": '{"s3://lake/hot": 4}',
            "WATCHER_DEAD_LETTERS": '{"orders": {"queue_arn": "arn:aws:sqs:eu-west-1:1:q", "dlq_url": "https://sqs/dlq"}}',
            "AWS_REGION": "eu-west-1",
        }
    )
    assert settings.path_map == {"s3://lake": "/data/lake"}
    assert settings.event_shards == {"s3://lake/hot": 4}
    assert settings.watcher_dead_letters == {
        "orders": {"queue_arn": "arn:aws:sqs:eu-west-1:1:q", "dlq_url": "https://sqs/dlq"}
    }
    assert settings.region == "eu-west-1"
    empty = Settings.from_env(BASE | {"ASSETFLOW_PATH_MAP": ""})
    assert (empty.path_map, empty.event_shards, empty.watcher_dead_letters) == (None, None, None)


@pytest.mark.parametrize("name", ["ASSETFLOW_PATH_MAP", "ASSETFLOW_EVENT_SHARDS", "WATCHER_DEAD_LETTERS"])
@pytest.mark.parametrize("value", ["not json", "[1, 2]", '"text"'])
def test_a_json_setting_that_is_not_an_object_is_refused_by_name(name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=f"^{name} must be a JSON object$"):
        Settings.from_env(BASE | {name: value})


@pytest.mark.parametrize("shards", ['{"s3://lake/hot": 0}', '{"s3://lake/hot": "4"}'])
def test_event_shards_must_be_counts_of_one_or_more(shards: str) -> None:
    with pytest.raises(SettingsError, match="must map asset URIs to shard counts"):
        Settings.from_env(BASE | {"ASSETFLOW_EVENT_SHARDS": shards})
