"""The one way assetflow makes an AWS SDK client: a session, an endpoint, a region and bounded retries."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

#: Retries in standard mode and bounded timeouts: a call fails in seconds, not minutes, when a service (or
#: an emulator) is away, and the SDK's own retries stay below the callers' (the stream's, the client's).
DEFAULT_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 4}, connect_timeout=5, read_timeout=30
)


def aws_client(
    service: str,
    *,
    session: boto3.session.Session | None = None,
    endpoint: str | None = None,
    region: str | None = None,
    config: Config | None = None,
) -> Any:
    """A client for ``service``: ``config`` over ``DEFAULT_CONFIG``, the session's region unless given.

    Without ``endpoint`` boto3 reads ``AWS_ENDPOINT_URL_<SERVICE>`` / ``AWS_ENDPOINT_URL`` (on Lambda: none,
    the service's public endpoint).
    """
    session = session or boto3.session.Session()
    merged = DEFAULT_CONFIG.merge(config) if config is not None else DEFAULT_CONFIG
    return session.client(
        service, region_name=region or session.region_name, config=merged, endpoint_url=endpoint
    )


__all__ = ["DEFAULT_CONFIG", "aws_client"]
