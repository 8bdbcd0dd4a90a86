"""Lambda's Invoke API for the local functions, on 127.0.0.1: what ``replay-failures`` and ``reconcile-runs`` call.

Moto's Lambda needs Docker, and the local functions live in the runtime's process anyway. This server answers
``POST /2015-03-31/functions/<name>/invocations`` as Lambda does, so boto3's Lambda client (with
``endpoint_url``) invokes the runtime's functions exactly as it invokes the deployed ones with ``--env``:
``RequestResponse`` runs the function and answers with its response (200, ``X-Amz-Function-Error: Unhandled``
and Lambda's error document when it raised); ``Event`` answers 202 and runs it on a thread.

It listens on loopback only, and a request must be signed with the runtime's token as its access key id
(``.assetflow/dev.json``, readable by its owner only): the same secret that the local HTTP API takes.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import threading
import traceback
from collections.abc import Callable, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

logger = logging.getLogger(__name__)

#: A function of the runtime: ``handler(event, context)`` with its dependencies bound.
Function = Callable[[dict[str, Any], Any], Any]

_PATH = re.compile(r"^/2015-03-31/functions/(?P<name>[^/]+)/invocations/?$")
_CREDENTIAL = re.compile(r"Credential=(?P<key>[^/,\s]+)/")
MAX_PAYLOAD_BYTES = 6 * 1024 * 1024


class LocalInvokeServer:
    """Serves the runtime's functions, by name, through Lambda's Invoke API on ``127.0.0.1:port``."""

    def __init__(self, functions: Mapping[str, Function], *, token: str, port: int = 0) -> None:
        if not token:
            raise ValueError("the invoke server needs a token")
        self.functions = dict(functions)
        self.token = token
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The endpoint to give boto3's Lambda client (``endpoint_url``)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        """Serve on a daemon thread."""
        self._thread = threading.Thread(target=self._server.serve_forever, name="invoke-server", daemon=True)
        self._thread.start()
        logger.info(
            "local invoke endpoint ready", extra={"url": self.url, "functions": sorted(self.functions)}
        )

    def stop(self) -> None:
        """Stop serving; idempotent (and harmless before ``start``)."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._server.shutdown()  # waits for serve_forever, which only a started server runs
            thread.join(5)
        self._server.server_close()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                logger.debug("invoke request", extra={"line": format % args})

            def do_POST(self) -> None:
                server._serve(self)

        return Handler

    def _serve(self, request: BaseHTTPRequestHandler) -> None:
        found = _PATH.match(request.path.split("?", 1)[0])
        if found is None:
            _answer(request, HTTPStatus.NOT_FOUND, {"Type": "User", "message": f"no route {request.path}"})
            return
        if not self._authorised(request.headers.get("Authorization", "")):
            _answer(
                request,
                HTTPStatus.FORBIDDEN,
                {"Type": "User", "message": "not signed with the runtime's token"},
            )
            return
        name = (
            found.group("name").rsplit(":", 1)[-1]
            if found.group("name").startswith("arn:")
            else found.group("name")
        )
        function = self.functions.get(name)
        if function is None:
            known = ", ".join(sorted(self.functions))
            _answer(
                request,
                HTTPStatus.NOT_FOUND,
                {"Type": "User", "message": f"Function not found: {name} (functions: {known})"},
                {"X-Amzn-ErrorType": "ResourceNotFoundException"},
            )
            return
        length = int(request.headers.get("Content-Length") or 0)
        if length > MAX_PAYLOAD_BYTES:
            _answer(
                request, HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"Type": "User", "message": "payload too large"}
            )
            return
        try:
            event = json.loads(request.rfile.read(length) or b"{}")
        except ValueError:
            _answer(request, HTTPStatus.BAD_REQUEST, {"Type": "User", "message": "the payload is not JSON"})
            return
        if request.headers.get("X-Amz-Invocation-Type") == "Event":
            threading.Thread(target=_run, args=(function, event), name=f"invoke-{name}", daemon=True).start()
            _answer(request, HTTPStatus.ACCEPTED, None)
            return
        response, error = _run(function, event)
        if error is not None:
            _answer(request, HTTPStatus.OK, error, {"X-Amz-Function-Error": "Unhandled"})
        else:
            _answer(request, HTTPStatus.OK, response)

    def _authorised(self, authorization: str) -> bool:
        found = _CREDENTIAL.search(authorization)
        return found is not None and hmac.compare_digest(found.group("key"), self.token)


def _run(function: Function, event: Any) -> tuple[Any, dict[str, Any] | None]:
    try:
        return function(event, None), None
    except Exception as exc:
        # Lambda's error document; the message may quote the event, as Lambda's does.
        return None, {
            "errorMessage": str(exc)[:2000],
            "errorType": type(exc).__name__,
            "stackTrace": traceback.format_exception(exc)[-5:],
        }


def _answer(
    request: BaseHTTPRequestHandler, status: HTTPStatus, body: Any, headers: Mapping[str, str] | None = None
) -> None:
    data = b"" if body is None else json.dumps(body, default=str).encode()
    request.send_response(status)
    request.send_header("Content-Type", "application/json")
    request.send_header("Content-Length", str(len(data)))
    request.send_header("X-Amz-Executed-Version", "$LATEST")
    for name, value in (headers or {}).items():
        request.send_header(name, value)
    request.end_headers()
    request.wfile.write(data)


__all__ = ["LocalInvokeServer"]
