"""The one way assetflow makes an AWS SDK client: a session, an endpoint, a region and bounded retries.

Clients come from botocore directly: boto3 adds nothing a client needs here and its import (s3transfer) costs
a function's cold start about 70 ms. A boto3 session, when one is given, is used as it is.
"""

from __future__ import annotations

import threading
from typing import Any

from botocore.config import Config

#: Retries in standard mode and bounded timeouts: a call fails in seconds, not minutes, when a service (or
#: an emulator) is away, and the SDK's own retries stay below the callers' (the stream's, the client's).
DEFAULT_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 4}, connect_timeout=5, read_timeout=30
)

_default_session: Any = None
_lock = threading.Lock()


def default_session() -> Any:
    """The process's botocore session (credentials and region from the environment), made once."""
    global _default_session  # one session per process, as boto3's default one
    with _lock:
        if _default_session is None:
            from botocore.session import get_session

            _default_session = get_session()
        return _default_session


def aws_client(
    service: str,
    *,
    session: Any = None,
    endpoint: str | None = None,
    region: str | None = None,
    config: Config | None = None,
) -> Any:
    """A client for ``service``: ``config`` over ``DEFAULT_CONFIG``, the session's region unless given.

    ``session`` is a boto3 or a botocore session (default: the process's botocore session). Without
    ``endpoint`` the SDK reads ``AWS_ENDPOINT_URL_<SERVICE>`` / ``AWS_ENDPOINT_URL`` (on Lambda: none, the
    service's public endpoint).
    """
    merged = DEFAULT_CONFIG.merge(config) if config is not None else DEFAULT_CONFIG
    if session is not None and hasattr(session, "client"):  # a boto3 session
        return session.client(
            service, region_name=region or session.region_name, config=merged, endpoint_url=endpoint
        )
    core = session or default_session()
    return core.create_client(
        service,
        region_name=region or core.get_config_variable("region"),
        config=merged,
        endpoint_url=endpoint,
    )


__all__ = ["DEFAULT_CONFIG", "aws_client", "default_session"]
