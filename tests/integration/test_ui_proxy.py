"""`assetflow ui --env`'s signing: requests checked by a stand-in API Gateway that verifies SigV4 itself.

The verifier recomputes each signature from the AWS Signature Version 4 specification with hashlib and hmac
(not botocore), with the credentials it knows, and answers 403 on any mismatch, as API Gateway's IAM
authoriser would. The proxy is driven as the browser drives it: its own bearer token, its own Host.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest

from assetflow_dev.api_client import ApiClient, SigV4Signer
from assetflow_dev.ui_proxy import UiProxy

ACCESS_KEY, SECRET_KEY, SESSION_TOKEN = (
    "AKIDEXAMPLE",
    "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
    "session-tok",
)
REGION, SERVICE = "eu-west-1", "execute-api"


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _quote(text: str) -> str:
    return urllib.parse.quote(text, safe="-_.~")


def verify(method: str, path: str, query: str, headers: dict[str, str], body: bytes) -> str | None:
    """None when the request's SigV4 signature is right for our credentials; else why not."""
    auth = headers.get("authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return "no SigV4 Authorization header"
    fields = dict(part.strip().split("=", 1) for part in auth.removeprefix("AWS4-HMAC-SHA256 ").split(","))
    access_key, date, region, service, terminal = fields["Credential"].split("/")
    if (access_key, region, service, terminal) != (ACCESS_KEY, REGION, SERVICE, "aws4_request"):
        return f"wrong scope {fields['Credential']}"
    if headers.get("x-amz-security-token") != SESSION_TOKEN:
        return "missing or wrong session token"
    amz_date = headers["x-amz-date"]
    signed = fields["SignedHeaders"].split(";")
    if "host" not in signed:
        return "host is not signed"
    pairs = sorted(urllib.parse.parse_qsl(query, keep_blank_values=True))
    canonical = "\n".join(
        [
            method,
            "/".join(_quote(_quote(urllib.parse.unquote(s))) for s in path.split("/")),
            "&".join(f"{_quote(k)}={_quote(v)}" for k, v in pairs),
            "".join(f"{name}:{' '.join(headers[name].split())}\n" for name in signed),
            fields["SignedHeaders"],
            hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = _hmac(_hmac(_hmac(_hmac(("AWS4" + SECRET_KEY).encode(), date), region), service), "aws4_request")
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return None if hmac.compare_digest(expected, fields["Signature"]) else "signature does not match"


class _Gateway(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[dict[str, Any]]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def _answer(self) -> None:
        target = urllib.parse.urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        problem = verify(self.command, target.path, target.query, headers, body)
        self.server.seen.append({"path": target.path, "headers": headers, "body": body, "problem": problem})  # type: ignore[attr-defined]
        status, doc = (
            (403, {"message": f"Forbidden: {problem}"})
            if problem
            else (201, {"ok": True, "path": target.path})
        )
        payload = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        if not problem:
            self.send_header("Idempotent-Replayed", "false")
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def gateway() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Gateway)
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def signer(secret: str = SECRET_KEY) -> SigV4Signer:
    session = boto3.session.Session(
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=secret,
        aws_session_token=SESSION_TOKEN,
        region_name=REGION,
    )
    return SigV4Signer(session)


def base(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/prod"


def test_the_client_signs_what_api_gateway_verifies(gateway: ThreadingHTTPServer) -> None:
    client = ApiClient(base(gateway), signer=signer())
    answer = client.call("POST", "/pipelines/orders_etl/runs", {"conf": {"full": True}}, query={"limit": "5"})
    assert answer.status == 201, answer.error_text()
    assert gateway.seen[-1]["problem"] is None  # type: ignore[attr-defined]
    assert gateway.seen[-1]["path"] == "/prod/pipelines/orders_etl/runs"  # type: ignore[attr-defined]


def test_the_verifier_refuses_a_wrong_secret(gateway: ThreadingHTTPServer) -> None:
    answer = ApiClient(base(gateway), signer=signer("not-the-secret")).call("GET", "/runs")
    assert answer.status == 403 and "signature does not match" in answer.error_text()


def _browser(
    proxy: UiProxy, method: str, path: str, *, token: str | None, host: str | None = None, body: bytes = b""
) -> tuple[int, Any, dict[str, str]]:
    connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    headers = {"Host": host or proxy.host_header, "Accept": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if body:
        headers["Content-Type"] = "application/json"
    connection.request(method, path, body=body or None, headers=headers)
    response = connection.getresponse()
    raw = response.read()
    connection.close()
    doc = json.loads(raw) if raw and "json" in (response.getheader("content-type") or "") else raw
    return response.status, doc, {k.lower(): v for k, v in response.getheaders()}


def test_the_proxy_serves_the_page_and_forwards_signed_calls_without_the_pages_token(
    gateway: ThreadingHTTPServer,
) -> None:
    with UiProxy(ApiClient(base(gateway), signer=signer())) as proxy:
        assert proxy.url.startswith(f"http://127.0.0.1:{proxy.port}/ui/#token=")
        status, page, _ = _browser(proxy, "GET", "/ui/", token=None)
        assert status == 200 and b"<title>assetflow</title>" in page

        status, doc, headers = _browser(
            proxy, "POST", "/runs/run-0123/replay?limit=3", token=proxy.token, body=b'{"a": 1}'
        )
        assert (status, doc["ok"]) == (201, True)
        assert headers["idempotent-replayed"] == "false"
        seen = gateway.seen[-1]  # type: ignore[attr-defined]
        assert seen["problem"] is None and seen["body"] == b'{"a": 1}'
        assert proxy.token not in json.dumps(seen["headers"])  # the page's token stays with the proxy

        assert _browser(proxy, "GET", "/runs", token="guess")[0] == 401  # noqa: S106
        assert _browser(proxy, "GET", "/runs", token=None)[0] == 401
        assert _browser(proxy, "GET", "/runs", token=proxy.token, host="evil.example:80")[0] == 421
        assert len(gateway.seen) == 1  # type: ignore[attr-defined]  (refused calls never left the proxy)


def test_a_refused_signature_reaches_the_page_as_the_gateways_answer(gateway: ThreadingHTTPServer) -> None:
    with UiProxy(ApiClient(base(gateway), signer=signer("wrong"))) as proxy:
        status, doc, _ = _browser(proxy, "GET", "/runs", token=proxy.token)
        assert status == 403 and "signature does not match" in doc["message"]
