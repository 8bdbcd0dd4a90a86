"""Fixed fake credentials and a boto3 client factory for the local emulators."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import boto3
import botocore.session
from botocore.config import Config

from assetflow.adapters.clients import aws_client

#: The region every local client and emulator uses.
LOCAL_REGION = "us-east-1"
#: moto's default account: ARNs that moto makes (and checks, e.g. EMR Serverless execution roles) use it.
LOCAL_ACCOUNT_ID = "123456789012"

#: Environment variables for processes that talk to the emulators (Spark jobs, the AWS CLI). Nothing here
#: touches `os.environ`: pass `dict(os.environ) | dict(LOCAL_AWS_ENV)` to a child process.
LOCAL_AWS_ENV: Mapping[str, str] = MappingProxyType(
    {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": LOCAL_REGION,
        "AWS_REGION": LOCAL_REGION,
    }
)

#: The same credentials as keyword arguments for `boto3.client` / `boto3.session.Session`.
LOCAL_CLIENT_KWARGS: Mapping[str, str] = MappingProxyType(
    {
        "region_name": LOCAL_REGION,
        "aws_access_key_id": LOCAL_AWS_ENV["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": LOCAL_AWS_ENV["AWS_SECRET_ACCESS_KEY"],
    }
)

#: Client settings for emulators on this machine: fail fast when one is down, retry transient errors a few
#: times (a restarting emulator, DynamoDB's TransactionInProgress) rather than the SDK defaults' long backoff.
LOCAL_CLIENT_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 3},
    connect_timeout=2,
    read_timeout=30,
    max_pool_connections=20,
)

_session_lock = threading.Lock()
_session: boto3.session.Session | None = None


def _local_session() -> boto3.session.Session:
    # One session for every local client: creating a client is not thread-safe on a shared session, so
    # creation is serialised; the clients themselves are thread-safe.
    global _session  # built on first use, never at import
    if _session is None:
        # Local clients ignore the user's AWS profile and config files: a profile named in AWS_PROFILE that
        # does not exist would fail every client, and a real one could bring its own endpoint or retries.
        core = botocore.session.Session(session_vars={"profile": (None, None, None, None)})
        core.set_config_variable("config_file", os.devnull)
        core.set_config_variable("credentials_file", os.devnull)
        _session = boto3.session.Session(botocore_session=core, **LOCAL_CLIENT_KWARGS)
    return _session


def client(service: str, endpoint: str, *, config: Config | None = None) -> Any:
    """Return a boto3 client for `service` at `endpoint` with the local region, fake credentials and retries.

    `config` is merged over `LOCAL_CLIENT_CONFIG` (e.g. `Config(retries={"total_max_attempts": 1})`).
    """
    merged = LOCAL_CLIENT_CONFIG.merge(config) if config is not None else LOCAL_CLIENT_CONFIG
    with _session_lock:
        return aws_client(service, session=_local_session(), endpoint=endpoint, config=merged)
