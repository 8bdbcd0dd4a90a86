"""``assetflow ui``: the web page on 127.0.0.1, its API calls forwarded to an assetflow API.

For a deployed environment (``--env NAME``) the API is IAM-authorised: the proxy signs each call with
Signature Version 4 from the operator's own AWS credentials (botocore's ``SigV4Auth``), so there is no public
page and no second sign-in system; what the page may do is what the operator's IAM policies allow (the
stack's read, emit and operate policies). Without ``--env`` it forwards to the local runtime's API with its
bearer token.

The page itself only knows the proxy: it opens at ``/ui/#token=...`` with a token made for this proxy (kept in
the tab's session storage, sent as a bearer token), which the proxy checks and drops before it forwards. A
request with another ``Host`` than the proxy's own address (DNS rebinding), or from another ``Origin``, is
refused; AWS credentials never reach the browser.
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
import threading
import urllib.parse
from http import HTTPStatus
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from assetflow_dev.api_client import ApiClient, ApiClientError
from assetflow_dev.api_server import UI_PATH, UI_STATIC, ServeEveryMethod

logger = logging.getLogger(__name__)

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
#: Answer headers of the API that the page may read.
_PASSED_BACK = ("content-type", "allow", "retry-after", "idempotent-replayed", "x-assetflow-warning")
MAX_BODY_BYTES = 12 * 1024 * 1024


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, proxy: UiProxy) -> None:
        self.proxy = proxy
        super().__init__(("127.0.0.1", proxy.requested_port), _Handler)


class _Handler(ServeEveryMethod):
    server: _Server
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes (see api_server)
    server_version = "assetflow-ui"
    sys_version = ""
    timeout = 60

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: requests are logged by the API."""

    def _serve(self) -> None:
        proxy = self.server.proxy
        target = urllib.parse.urlsplit(self.path)
        if self.headers.get("host") != proxy.host_header:
            self._json(
                HTTPStatus.MISDIRECTED_REQUEST, "bad_host", f"this proxy answers at {proxy.host_header} only"
            )
            return
        origin = self.headers.get("origin")
        if origin is not None and origin != proxy.origin:
            self._json(HTTPStatus.FORBIDDEN, "forbidden", "calls from another origin are refused")
            return
        if target.path == UI_PATH.rstrip("/"):
            self._send(HTTPStatus.MOVED_PERMANENTLY, b"", "text/plain", {"Location": UI_PATH})
            return
        if target.path.startswith(UI_PATH):
            self._static(target.path.removeprefix(UI_PATH) or "index.html")
            return
        scheme, _, credential = (self.headers.get("authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            credential.strip().encode(), proxy.token.encode()
        ):
            self._json(
                HTTPStatus.UNAUTHORIZED, "unauthorized", "open the page from the link `assetflow ui` printed"
            )
            return
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_BODY_BYTES:
            self._json(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "payload_too_large", "the body is too large")
            return
        body = self.rfile.read(length) if length else b""
        query = dict(urllib.parse.parse_qsl(target.query, keep_blank_values=True))
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            answer = proxy.client.send(self.command, target.path, body=body, headers=headers, query=query)
        except ApiClientError as exc:
            self._json(HTTPStatus.BAD_GATEWAY, "unreachable", str(exc))
            return
        passed = {k: v for k, v in answer.headers.items() if k in _PASSED_BACK}
        content_type = passed.pop("content-type", "application/json")
        self._send(answer.status, answer.body, content_type, passed)

    def _static(self, name: str) -> None:
        static = self.server.proxy.static_dir
        file = (static / name).resolve()
        content_type = _TYPES.get(file.suffix)
        if self.command != "GET":
            self._json(HTTPStatus.METHOD_NOT_ALLOWED, "method_not_allowed", "the page's files are read-only")
            return
        if (
            content_type is None
            or "/" in name
            or name.startswith(".")
            or file.parent != static
            or not file.is_file()
        ):
            self._json(HTTPStatus.NOT_FOUND, "not_found", f"no file {name!r} in the web page")
            return
        self._send(HTTPStatus.OK, file.read_bytes(), content_type)

    def _json(self, status: HTTPStatus, code: str, detail: str) -> None:
        self._send(status, json.dumps({"error": code, "detail": detail}).encode(), "application/json")

    def _send(
        self, status: int, payload: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)


class UiProxy:
    """The page's files and a forwarding proxy to ``client`` on 127.0.0.1; use it as a context manager."""

    def __init__(self, client: ApiClient, *, port: int = 0, static_dir: Path = UI_STATIC) -> None:
        self.client = client
        self.requested_port = port
        self.static_dir = static_dir.resolve()
        self.token = secrets.token_urlsafe(32)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port it listens on."""
        if self._server is None:
            raise RuntimeError("the proxy is not started")
        return int(self._server.server_address[1])

    @property
    def host_header(self) -> str:
        """The ``Host`` a browser sends to it."""
        return f"127.0.0.1:{self.port}"

    @property
    def origin(self) -> str:
        """Its own origin."""
        return f"http://{self.host_header}"

    @property
    def url(self) -> str:
        """The page's URL, signed in (the token in the fragment never reaches a server)."""
        return f"{self.origin}{UI_PATH}#token={self.token}"

    def start(self) -> UiProxy:
        """Listen and serve in a daemon thread."""
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, name="ui-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; idempotent."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> UiProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["UiProxy"]
