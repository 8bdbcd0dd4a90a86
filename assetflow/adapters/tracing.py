"""X-Ray subsegments around every AWS call a function makes, without the X-Ray SDK.

Lambda's active tracing records each invocation as a segment and hands the function its trace header
(``_X_AMZN_TRACE_ID``: ``Root=...;Parent=...;Sampled=...``) and the daemon's address
(``AWS_XRAY_DAEMON_ADDRESS``). The X-Ray SDK (and Powertools' Tracer on top of it) adds about 0.2 s to a cold
start; a subsegment is only a small JSON document sent over UDP to that daemon, which is what this module
does, from botocore's own ``before-parameter-build`` and ``after-call`` events. Nothing is sent when the invocation is
not sampled or there is no daemon (tests, the local runtime); a failed send is ignored (tracing never fails
a call).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

_HEADER = b'{"format": "json", "version": 1}\n'
_TRACE_ENV = "_X_AMZN_TRACE_ID"
_DAEMON_ENV = "AWS_XRAY_DAEMON_ADDRESS"
#: What a subsegment names of the request, per service (the X-Ray SDK's ``aws`` fields, in short).
_RESOURCE_PARAMS = {
    "dynamodb": ("TableName",),
    "sqs": ("QueueUrl",),
    "s3": ("Bucket",),
    "events": (),
    "emr-serverless": ("applicationId",),
}

_local = threading.local()
_socket_lock = threading.Lock()
_socket: socket.socket | None = None


def trace_header() -> dict[str, str]:
    """The invocation's trace header as a mapping (empty outside Lambda's active tracing)."""
    raw = os.environ.get(_TRACE_ENV, "")
    parts = (p.split("=", 1) for p in raw.split(";") if "=" in p)
    return {k.strip(): v.strip() for k, v in parts}


def _daemon() -> tuple[str, int] | None:
    address = os.environ.get(_DAEMON_ENV, "")
    # The variable may name both a UDP and a TCP address: "tcp:host:port udp:host:port".
    for part in address.split():
        if part.startswith("tcp:"):
            continue
        host, _, port = part.removeprefix("udp:").rpartition(":")
        if host and port.isdigit():
            return host, int(port)
    return None


def _send(document: Mapping[str, Any], address: tuple[str, int]) -> None:
    global _socket  # one UDP socket per process
    try:
        with _socket_lock:
            if _socket is None:
                _socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            _socket.sendto(_HEADER + json.dumps(document, separators=(",", ":")).encode(), address)
    except OSError:
        pass  # tracing is best effort


def _before(model: Any, params: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
    header = trace_header()
    if header.get("Sampled") != "1" or not header.get("Root") or not header.get("Parent"):
        return
    context["xray"] = (header, time.time(), params)


def _after(
    http_response: Any, parsed: Mapping[str, Any], model: Any, context: dict[str, Any], **_: Any
) -> None:
    started = context.pop("xray", None)
    address = _daemon()
    if started is None or address is None:
        return
    header, began, params = started
    service = model.service_model.service_name
    status = getattr(http_response, "status_code", 0) or 0
    aws: dict[str, Any] = {"operation": model.name}
    metadata = parsed.get("ResponseMetadata") if isinstance(parsed, Mapping) else None
    if isinstance(metadata, Mapping) and metadata.get("RequestId"):
        aws["request_id"] = metadata["RequestId"]
    for name in _RESOURCE_PARAMS.get(service, ()):
        if isinstance(params, Mapping) and isinstance(params.get(name), str):
            aws[name[0].lower() + name[1:]] = params[name]
    document: dict[str, Any] = {
        "name": model.service_model.service_id or service,
        "id": secrets.token_hex(8),
        "trace_id": header["Root"],
        "parent_id": header["Parent"],
        "type": "subsegment",
        "namespace": "aws",
        "start_time": began,
        "end_time": time.time(),
        "aws": aws,
        "http": {"response": {"status": status}},
    }
    if status >= 500:
        document["fault"] = True
    elif status >= 400:
        document["error"] = True
        if status == 429:
            document["throttle"] = True
    _send(document, address)


def trace_calls(client: Any) -> Any:
    """Record each call of ``client`` as an X-Ray subsegment of the invocation (when traced); returns it."""
    events = client.meta.events
    events.register("before-parameter-build", _before, unique_id="assetflow-xray-before")
    events.register("after-call", _after, unique_id="assetflow-xray-after")
    return client


__all__ = ["trace_calls", "trace_header"]
