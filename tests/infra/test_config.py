"""The environment configs: typed, frozen, keyword-only, and checked on construction."""

from __future__ import annotations

import dataclasses

import pytest

from assetflow.cdk.config import (
    ENVIRONMENTS,
    ConfigError,
    EnvironmentConfig,
    KafkaClusterConfig,
    config_for,
    split_location,
)

pytestmark = pytest.mark.infra


def test_dev_and_prod_exist_and_differ_only_in_values() -> None:
    assert {"dev", "prod"} <= set(ENVIRONMENTS)
    assert all(type(c) is EnvironmentConfig for c in ENVIRONMENTS.values())


def test_configs_are_frozen_and_keyword_only() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        ENVIRONMENTS["dev"].name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        EnvironmentConfig("positional")  # type: ignore[misc]


def test_an_unknown_environment_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="dev, prod"):
        config_for("staging")


def test_data_locations_must_be_plain_s3_prefixes() -> None:
    with pytest.raises(ConfigError, match="data location"):
        EnvironmentConfig(name="x", data_read_locations=("s3://bucket/prefix/*",))
    assert split_location("s3://bucket/a/b/") == ("bucket", "a/b/")
    assert split_location("s3://bucket/") == ("bucket", "")


def test_lambdas_own_log_level_is_one_lambda_knows_and_warn_by_default() -> None:
    assert EnvironmentConfig(name="x").system_log_level == "WARN"
    with pytest.raises(ConfigError, match="system_log_level must be one of DEBUG, INFO, WARN"):
        EnvironmentConfig(name="x", system_log_level="ERROR")  # type: ignore[arg-type]


def test_a_self_managed_cluster_needs_a_secret() -> None:
    with pytest.raises(ConfigError, match="secret_arn"):
        KafkaClusterConfig(bootstrap_servers=("b-1:9092",))
    with pytest.raises(ConfigError, match="exactly one"):
        KafkaClusterConfig()
