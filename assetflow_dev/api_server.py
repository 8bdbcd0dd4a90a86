"""The local HTTP API: DESIGN §5's routes on 127.0.0.1, served by the API function as API Gateway calls it.

On AWS, API Gateway authorises each request with IAM and invokes the API function with an HTTP API payload
v2.0 event. Locally, a bearer token stands in for IAM: a request without the runtime's token gets 401 before
the function runs; one with it reaches the function with the IAM authorizer's shape for a local principal.
The function's response (status, headers, cookies, text or base64 body) is written back as API Gateway
writes it.

The web page's static files are served at ``/ui/`` without the token: a browser opening the page cannot
send the header. The page takes its token from the URL fragment (``/ui/#token=...``, never sent to a server)
and calls the API beside it with the header.
"""

from __future__ import annotations

import base64
import hmac
import ipaddress
import json
import logging
import secrets
import socket
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from assetflow_dev.aws import LOCAL_ACCOUNT_ID, LOCAL_REGION

logger = logging.getLogger(__name__)

#: Handles one API Gateway HTTP API (payload v2.0) event with a Lambda context; returns the v2 response.
ApiHandler = Callable[[dict[str, Any], Any], dict[str, Any]]

#: The caller every authorised local request is made by (the IAM authorizer's ``userArn`` on AWS).
LOCAL_PRINCIPAL = f"arn:aws:iam::{LOCAL_ACCOUNT_ID}:user/assetflow-local"
LOCAL_API_ID = "local"
LOCAL_FUNCTION_NAME = "assetflow-local-api"
MAX_CHUNK_LINE = 1024

# API Gateway passes these bodies as text; every other one (a missing Content-Type too) as base64.
_TEXT_TYPES = frozenset({"application/json", "application/xml", "application/javascript"})
# Never handed to the function: the cookie header becomes ``cookies``; the token is the local credential,
# consumed by the check here (on AWS, IAM's signature is consumed by API Gateway the same way).
_NOT_FORWARDED = frozenset({"cookie", "authorization"})
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
# After an early error answer, how long and how much of an unread body to discard so the client reads the
# answer instead of a connection reset (the "lingering close" of web servers).
_LINGER_SECONDS = 2.0
_LINGER_BYTES = 64 * 1024 * 1024

#: The web page's files (package data of assetflow_dev), served at ``UI_PATH``.
UI_STATIC = Path(__file__).resolve().parent / "ui" / "static"
UI_PATH = "/ui/"
_UI_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}


@dataclass(frozen=True)
class _LambdaContext:
    """What the API function reads of Lambda's context object (Powertools' Logger reads these)."""

    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    function_name: str = LOCAL_FUNCTION_NAME
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = (
        f"arn:aws:lambda:{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}:function:{LOCAL_FUNCTION_NAME}"
    )
    log_group_name: str = f"/aws/lambda/{LOCAL_FUNCTION_NAME}"
    log_stream_name: str = "local"
    deadline: float = field(default_factory=lambda: time.monotonic() + 30.0)

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left of a 30 s function timeout."""
        return max(0, int((self.deadline - time.monotonic()) * 1000))


class _EarlyAnswerError(Exception):
    """A request answered before the function runs (401, 400, 411, 413)."""

    def __init__(
        self, status: HTTPStatus, code: str, detail: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.headers = headers or {}


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _is_text(content_type: str | None) -> bool:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media.startswith("text/") or media in _TEXT_TYPES


def _gateway_time(moment: datetime) -> str:
    # API Gateway's own format, English month names whatever the locale: "12/Mar/2020:19:03:58 +0000".
    return f"{moment:%d}/{_MONTHS[moment.month - 1]}/{moment:%Y:%H:%M:%S} +0000"


def _request_id() -> str:
    return base64.b64encode(secrets.token_bytes(11)).decode()


def _trace_id(moment: datetime) -> str:
    return f"Root=1-{int(moment.timestamp()):08x}-{secrets.token_hex(12)}"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], api: LocalApiServer, family: socket.AddressFamily) -> None:
        self.address_family = family
        self.api = api
        super().__init__(address, _RequestHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Log a connection that failed mid-request (a client gone away) without a traceback on stderr."""
        logger.warning(
            "api connection failed", extra={"client": client_address[0] if client_address else None}
        )


class ServeEveryMethod(BaseHTTPRequestHandler):
    """A request handler whose GET, POST, PUT, PATCH and DELETE all go to ``_serve`` (the API's methods)."""

    def _serve(self) -> None:
        raise NotImplementedError

    def do_GET(self) -> None:
        """Serve a GET."""
        self._serve()

    def do_POST(self) -> None:
        """Serve a POST."""
        self._serve()

    def do_PUT(self) -> None:
        """Serve a PUT."""
        self._serve()

    def do_PATCH(self) -> None:
        """Serve a PATCH."""
        self._serve()

    def do_DELETE(self) -> None:
        """Serve a DELETE."""
        self._serve()


class _RequestHandler(ServeEveryMethod):
    """One connection: checks the token and the size, then builds the event and calls the function."""

    server: _Server
    protocol_version = "HTTP/1.1"
    # Headers and body go out as two writes: with Nagle's algorithm the body waits for the client's delayed
    # ACK of the headers, 40 ms on Linux, on every keep-alive request.
    disable_nagle_algorithm = True
    server_version = "assetflow-local"
    sys_version = ""
    #: Seconds an idle keep-alive connection (or a slow body) may hold a thread.
    timeout = 30

    def do_HEAD(self) -> None:
        """Serve a HEAD."""
        self._serve()

    def do_OPTIONS(self) -> None:
        """Serve a OPTIONS."""
        self._serve()

    def handle_expect_100(self) -> bool:
        """Refuse an unauthorised or too large request before its client sends the body."""
        try:
            self._check_request()
        except _EarlyAnswerError as answer:
            self._answer_early(answer, linger=False)
            return False
        return super().handle_expect_100()

    def log_message(self, format: str, *args: Any) -> None:
        """Silence http.server's access log on stderr (requests are logged once, structured, by ``_serve``)."""

    def log_error(self, format: str, *args: Any) -> None:
        """Log malformed requests without their content."""
        logger.warning(
            "bad http request", extra={"client": self.client_address[0], "status": args[0] if args else None}
        )

    # ---- the request -----------------------------------------------------------------------------------

    def _serve(self) -> None:
        began = time.monotonic()
        api = self.server.api
        request_id = _request_id()
        path = urllib.parse.urlsplit(self.path).path
        if path == UI_PATH.rstrip("/") or path.startswith(UI_PATH):
            self._access_log(request_id, self._serve_ui(path), began)
            return
        try:
            self._check_request()
            body = self._read_body(api.max_body_bytes)
        except _EarlyAnswerError as answer:
            self._answer_early(answer, linger=True)
            self._access_log(request_id, answer.status, began)
            return
        event = self._event(body, request_id)
        context = _LambdaContext()
        try:
            response = api.handler(event, context)
        except Exception:  # Lambda's unhandled error: API Gateway answers 500 without internals
            logger.exception("api function failed", extra={"request_id": request_id})
            response = {
                "statusCode": HTTPStatus.INTERNAL_SERVER_ERROR,
                "headers": {"content-type": "application/json"},
                "body": json.dumps({"message": "Internal Server Error"}),
            }
        status = self._respond(response, request_id)
        self._access_log(request_id, status, began)

    def _serve_ui(self, path: str) -> int:
        """A file of the web page (no token needed: it holds no data); ``/ui`` redirects to ``/ui/``."""
        if path == UI_PATH.rstrip("/"):
            return self._send_plain(HTTPStatus.MOVED_PERMANENTLY, b"", "text/plain", {"Location": UI_PATH})
        if self.command not in ("GET", "HEAD"):
            return self._send_plain(
                HTTPStatus.METHOD_NOT_ALLOWED,
                json.dumps(
                    {"error": "method_not_allowed", "detail": "the page's files are read-only"}
                ).encode(),
                "application/json",
                {"Allow": "GET, HEAD"},
            )
        name = path.removeprefix(UI_PATH) or "index.html"
        static = self.server.api.static_dir
        file = (static / name).resolve() if static is not None else None
        content_type = _UI_TYPES.get(file.suffix) if file is not None else None
        # Only a file directly in the folder: no subfolders, no "..", no dot files.
        if (
            file is None
            or content_type is None
            or "/" in name
            or name.startswith(".")
            or file.parent != static.resolve()  # type: ignore[union-attr]
            or not file.is_file()
        ):
            detail = (
                f"no file {name!r} in the web page" if static is not None else "the web page is not installed"
            )
            return self._send_plain(
                HTTPStatus.NOT_FOUND,
                json.dumps({"error": "not_found", "detail": detail}).encode(),
                "application/json",
            )
        return self._send_plain(HTTPStatus.OK, file.read_bytes(), content_type)

    def _send_plain(
        self, status: HTTPStatus, payload: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> int:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)
        return int(status)

    def _check_request(self) -> None:
        api = self.server.api
        given = self.headers.get("authorization")
        scheme, _, credential = (given or "").partition(" ")
        if not given or scheme.lower() != "bearer" or not credential.strip():
            raise _EarlyAnswerError(
                HTTPStatus.UNAUTHORIZED,
                "unauthorized",
                "send the token from .assetflow/dev.json as 'Authorization: Bearer <token>'",
                {"WWW-Authenticate": 'Bearer realm="assetflow-local"'},
            )
        if not hmac.compare_digest(credential.strip().encode(), api.token.encode()):
            raise _EarlyAnswerError(
                HTTPStatus.UNAUTHORIZED,
                "unauthorized",
                "the bearer token is not this runtime's (see .assetflow/dev.json)",
                {"WWW-Authenticate": 'Bearer realm="assetflow-local", error="invalid_token"'},
            )
        length = self.headers.get("content-length")
        if length is not None:
            if not length.strip().isdigit():
                raise _EarlyAnswerError(HTTPStatus.BAD_REQUEST, "bad_request", "invalid Content-Length")
            if int(length) > api.max_body_bytes:
                raise _EarlyAnswerError(
                    HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                    "payload_too_large",
                    f"the body is over the limit of {api.max_body_bytes} bytes",
                )

    def _read_body(self, limit: int) -> bytes:
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            return self._read_chunked(limit)
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _read_chunked(self, limit: int) -> bytes:
        body = bytearray()
        while True:
            line = self.rfile.readline(MAX_CHUNK_LINE)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError as exc:
                raise _EarlyAnswerError(
                    HTTPStatus.BAD_REQUEST, "bad_request", "invalid chunked body"
                ) from exc
            if size == 0:
                while self.rfile.readline(MAX_CHUNK_LINE) not in (b"\r\n", b"\n", b""):
                    pass  # trailers: nothing the function sees
                return bytes(body)
            if len(body) + size > limit:
                raise _EarlyAnswerError(
                    HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                    "payload_too_large",
                    f"the body is over the limit of {limit} bytes",
                )
            body += self.rfile.read(size)
            self.rfile.readline(MAX_CHUNK_LINE)

    def _event(self, body: bytes, request_id: str) -> dict[str, Any]:
        """The API Gateway HTTP API payload v2.0 event of this request, for a ``$default`` route."""
        api = self.server.api
        now = datetime.now(UTC)
        target = urllib.parse.urlsplit(self.path)
        # HTTP APIs hand the function the decoded path, and the query string as it was sent.
        path = urllib.parse.unquote(target.path) or "/"
        headers: dict[str, str] = {}
        cookies: list[str] = []
        for name, value in self.headers.items():
            key = name.lower()
            if key == "cookie":
                cookies += [c.strip() for c in value.split(";") if c.strip()]
            elif key not in _NOT_FORWARDED:
                headers[key] = f"{headers[key]},{value}" if key in headers else value
        client_ip = self.client_address[0]
        headers.setdefault("x-forwarded-for", client_ip)
        headers.setdefault("x-forwarded-port", str(api.port))
        headers.setdefault("x-forwarded-proto", "http")
        headers.setdefault("x-amzn-trace-id", _trace_id(now))
        domain = (self.headers.get("host") or api.host).rsplit(":", 1)[0].strip("[]")
        event: dict[str, Any] = {
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": path,
            "rawQueryString": target.query,
        }
        if cookies:
            event["cookies"] = cookies
        event["headers"] = headers
        if target.query:
            grouped: dict[str, list[str]] = {}
            for name, value in urllib.parse.parse_qsl(target.query, keep_blank_values=True):
                grouped.setdefault(name, []).append(value)
            event["queryStringParameters"] = {name: ",".join(values) for name, values in grouped.items()}
        event["requestContext"] = {
            "accountId": LOCAL_ACCOUNT_ID,
            "apiId": LOCAL_API_ID,
            "authorizer": {
                "iam": {
                    "accessKey": "ASIALOCALASSETFLOW00",
                    "accountId": LOCAL_ACCOUNT_ID,
                    "callerId": "AIDALOCALASSETFLOW00",
                    "cognitoIdentity": None,
                    "principalOrgId": None,
                    "userArn": api.principal,
                    "userId": "AIDALOCALASSETFLOW00",
                }
            },
            "domainName": domain,
            "domainPrefix": domain.split(".", 1)[0],
            "http": {
                "method": self.command.upper(),
                "path": path,
                "protocol": self.request_version,
                "sourceIp": client_ip,
                "userAgent": self.headers.get("user-agent", ""),
            },
            "requestId": request_id,
            "routeKey": "$default",
            "stage": "$default",
            "time": _gateway_time(now),
            "timeEpoch": int(now.timestamp() * 1000),
        }
        if body:
            if _is_text(headers.get("content-type")):
                try:
                    event["body"], event["isBase64Encoded"] = body.decode("utf-8"), False
                except UnicodeDecodeError:
                    event["body"], event["isBase64Encoded"] = base64.b64encode(body).decode(), True
            else:
                event["body"], event["isBase64Encoded"] = base64.b64encode(body).decode(), True
        else:
            event["isBase64Encoded"] = False
        return event

    # ---- the response ----------------------------------------------------------------------------------

    def _respond(self, response: Any, request_id: str) -> int:
        """Write a v2 response back as API Gateway does; returns the status sent."""
        if not isinstance(response, dict) or "statusCode" not in response:
            # API Gateway's rule for a payload v2 function that returns something else: 200 with it as JSON.
            response = {
                "statusCode": 200,
                "headers": {"content-type": "application/json"},
                "body": json.dumps(response),
            }
        status = int(response["statusCode"])
        raw = response.get("body")
        text = raw if isinstance(raw, str) else ("" if raw is None else json.dumps(raw))
        payload = base64.b64decode(text) if response.get("isBase64Encoded") else text.encode("utf-8")
        self.send_response(status)
        headers = {str(k): str(v) for k, v in (response.get("headers") or {}).items()}
        for name, values in (response.get("multiValueHeaders") or {}).items():
            for value in values:
                self.send_header(str(name), str(value))
        for name, value in headers.items():
            if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(name, value)
        for cookie in response.get("cookies") or []:
            self.send_header("Set-Cookie", str(cookie))
        if not any(name.lower() == "content-type" for name in headers):
            self.send_header("Content-Type", "application/json")
        self.send_header("Apigw-Requestid", request_id)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)
        return status

    def _answer_early(self, answer: _EarlyAnswerError, *, linger: bool) -> None:
        payload = json.dumps({"error": answer.code, "detail": answer.detail}).encode()
        self.send_response(answer.status)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        # The body was not read: this connection cannot carry another request.
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)
        self.wfile.flush()
        self.close_connection = True
        if linger:
            self._discard_unread_body()

    def _discard_unread_body(self) -> None:
        # Closing with unread data makes the kernel send a reset, which can destroy the answer before the
        # client reads it. Say we are done writing, then drop what the client still sends, for a short while.
        try:
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(0.5)
            until = time.monotonic() + _LINGER_SECONDS
            dropped = 0
            while time.monotonic() < until and dropped < _LINGER_BYTES:
                chunk = self.connection.recv(65536)
                if not chunk:
                    return
                dropped += len(chunk)
        except OSError:
            return

    def _access_log(self, request_id: str, status: int, began: float) -> None:
        # Method, path and status only: no query string, headers, body or token.
        logger.info(
            "api request",
            extra={
                "request_id": request_id,
                "method": self.command,
                "path": urllib.parse.urlsplit(self.path).path,
                "status": int(status),
                "ms": round((time.monotonic() - began) * 1000, 1),
            },
        )


class LocalApiServer:
    """DESIGN §5's HTTP API on the loopback interface, calling the API function with payload v2.0 events.

    Every request must carry ``Authorization: Bearer <token>`` (compared in constant time); others get 401
    ``{"error": "unauthorized", "detail": ...}`` with ``WWW-Authenticate: Bearer`` before the function runs.
    The only exception is the web page's files under ``/ui/`` (from ``static_dir``; None serves no page).
    A body over ``max_body_bytes`` gets 413 without being read. ``port=0`` picks a free port (see ``url``).

    Raises:
        ValueError: ``host`` is not a loopback address, or the token is empty.
    """

    def __init__(
        self,
        *,
        handler: ApiHandler,
        token: str,
        host: str = "127.0.0.1",
        port: int = 0,
        max_body_bytes: int = 1_048_576,
        principal: str = LOCAL_PRINCIPAL,
        static_dir: Path | None = UI_STATIC,
    ) -> None:
        if not _is_loopback(host):
            raise ValueError(
                f"the local API listens on a loopback address only (127.0.0.1, ::1), not {host!r}"
            )
        if not token:
            raise ValueError("the local API needs a token")
        self.handler = handler
        self.token = token
        self.host = "127.0.0.1" if host == "localhost" else host
        self.max_body_bytes = max_body_bytes
        self.principal = principal
        self.static_dir = static_dir if static_dir is not None and static_dir.is_dir() else None
        self._port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port listened on (the one chosen at ``start()`` when created with ``port=0``)."""
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (IPv6 loopback in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def ui_url(self) -> str:
        """The web page, signed in: the token travels in the fragment, which browsers never send."""
        return f"{self.url}{UI_PATH}#token={urllib.parse.quote(self.token, safe='')}"

    def start(self) -> None:
        """Bind and serve on a daemon thread; idempotent while running.

        Raises:
            OSError: the port cannot be bound.
        """
        if self._server is not None:
            return
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        self._server = _Server((self.host, self._port), self, family)
        self._port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.2}, name="local-api", daemon=True
        )
        self._thread.start()
        logger.info("local api listening", extra={"url": self.url})

    def stop(self) -> None:
        """Stop serving and close the socket; idempotent."""
        server, thread = self._server, self._thread
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(5.0)
        self._server = self._thread = None
        logger.info("local api stopped")


__all__ = ["LOCAL_PRINCIPAL", "UI_PATH", "UI_STATIC", "ApiHandler", "LocalApiServer"]
