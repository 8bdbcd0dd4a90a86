"""A client of the assetflow HTTP API: the local runtime's (bearer token) or a deployed one's (SigV4, IAM).

The CLI's commands that start or stop jobs (``runs trigger|cancel|replay``, ``pipelines pause|unpause``,
``backfill``) call the API rather than the store, because the process that runs the jobs must act: locally
that is ``assetflow dev up``'s launcher, on AWS the API function with its EMR Serverless permissions.
``assetflow ui --env`` forwards the web page's calls through the same signer.

A deployed API is IAM-authorised: each request is signed with Signature Version 4 (service ``execute-api``)
with the operator's own AWS credentials, through botocore's ``SigV4Auth``, as the AWS CLI signs its requests.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: The headers a signed request carries over to API Gateway (the others are the client's business).
FORWARDED_HEADERS = ("content-type", "accept", "idempotency-key")
DEFAULT_TIMEOUT = 60.0


class ApiClientError(Exception):
    """No answer from the API (unreachable, timed out), or no way to reach one."""


@dataclass(frozen=True)
class ApiAnswer:
    """One answer: its status, its headers (lower-case names) and its body (JSON when it is JSON)."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    doc: Any = None

    @property
    def ok(self) -> bool:
        """A 2xx answer."""
        return 200 <= self.status < 300

    def error_text(self) -> str:
        """The ``detail`` of an error answer (API Gateway's own errors say ``message``), else its text."""
        if isinstance(self.doc, dict):
            detail = self.doc.get("detail") or self.doc.get("message")
            if detail:
                return f"{self.doc.get('error') or self.status}: {detail}"
        return f"HTTP {self.status}: {self.body[:300].decode(errors='replace')}"


class SigV4Signer:
    """Signs requests for API Gateway (``execute-api``) with a botocore session's credentials.

    Raises ``ApiClientError`` on use when the session has no credentials or no region.
    """

    service = "execute-api"

    def __init__(self, session: Any = None, *, region: str | None = None) -> None:
        import boto3

        self.session = session or boto3.session.Session()
        self.region = region or self.session.region_name

    def sign(self, method: str, url: str, headers: Mapping[str, str], body: bytes) -> dict[str, str]:
        """The headers to send: ``headers`` plus ``Authorization``, ``X-Amz-Date`` (and the session token)."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        credentials = self.session.get_credentials()
        if credentials is None:
            raise ApiClientError(
                "no AWS credentials to sign the API calls with: configure them (aws configure, AWS_PROFILE, SSO)"
            )
        if not self.region:
            raise ApiClientError(
                "no AWS region to sign the API calls for: set AWS_REGION or AWS_DEFAULT_REGION"
            )
        request = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
        SigV4Auth(credentials.get_frozen_credentials(), self.service, self.region).add_auth(request)
        return dict(request.headers.items())


@dataclass
class ApiClient:
    """Calls one API: ``base_url`` with a bearer ``token`` (the local runtime) or a ``signer`` (AWS)."""

    base_url: str
    token: str | None = None
    signer: SigV4Signer | None = None
    timeout: float = DEFAULT_TIMEOUT
    #: Where the API was found, for messages: ".assetflow/dev.json" or "stack assetflow-dev".
    origin: str = ""
    extra_headers: dict[str, str] = field(default_factory=dict)

    def url(self, path: str, query: Mapping[str, str] | None = None) -> str:
        """The absolute URL of an API path (``/runs/...``), with its query."""
        base = self.base_url.rstrip("/")
        text = urllib.parse.urlencode(dict(query or {}))
        return f"{base}{path}" + (f"?{text}" if text else "")

    def send(
        self,
        method: str,
        path: str,
        *,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
        query: Mapping[str, str] | None = None,
    ) -> ApiAnswer:
        """Send one request as it is (a proxy's path); returns the answer whatever its status.

        Raises:
            ApiClientError: no answer (connection refused, timeout), or the request cannot be signed.
        """
        url = self.url(path, query)
        sent = {k.lower(): v for k, v in (headers or {}).items() if k.lower() in FORWARDED_HEADERS}
        sent |= {k.lower(): v for k, v in self.extra_headers.items()}
        if self.token is not None:
            sent["authorization"] = f"Bearer {self.token}"
        if self.signer is not None:
            sent = self.signer.sign(method, url, sent, body)
        request = urllib.request.Request(url, data=body or None, method=method, headers=sent)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 (http(s) URLs)
                return _answer(response.status, dict(response.headers.items()), response.read())
        except urllib.error.HTTPError as exc:
            return _answer(exc.code, dict(exc.headers.items()) if exc.headers else {}, exc.read())
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            where = f" (from {self.origin})" if self.origin else ""
            raise ApiClientError(f"cannot reach the API at {self.base_url}{where}: {reason}") from exc

    def call(
        self,
        method: str,
        path: str,
        doc: Any = None,
        *,
        headers: Mapping[str, str] | None = None,
        query: Mapping[str, str] | None = None,
    ) -> ApiAnswer:
        """Send a JSON request (``doc`` as the body, when given) and parse the JSON answer.

        Raises:
            ApiClientError: no answer.
        """
        body = b"" if doc is None else json.dumps(doc).encode()
        sent = {"accept": "application/json", **(headers or {})}
        if doc is not None:
            sent["content-type"] = "application/json"
        return self.send(method, path, body=body, headers=sent, query=query)


def _answer(status: int, headers: Mapping[str, str], body: bytes) -> ApiAnswer:
    lowered = {k.lower(): v for k, v in headers.items()}
    doc = None
    if body and "json" in lowered.get("content-type", ""):
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
    return ApiAnswer(status, lowered, body, doc)


def local_client(dev_config: Mapping[str, Any], *, origin: str = ".assetflow/dev.json") -> ApiClient:
    """The local runtime's API, from ``dev.json``'s ``"api": {"url", "token"}``.

    Raises:
        ApiClientError: the document names no API.
    """
    api = dev_config.get("api")
    if not isinstance(api, dict) or not api.get("url") or not api.get("token"):
        raise ApiClientError(f'{origin} names no API ("api": {{"url", "token"}}); restart `assetflow dev up`')
    return ApiClient(str(api["url"]), token=str(api["token"]), origin=origin)


def deployed_client(env: str, *, session: Any = None, cloudformation: Any = None) -> ApiClient:
    """A deployed environment's API (its stack's ``ApiUrl`` output), signed with the session's credentials.

    Raises:
        ApiClientError: the stack cannot be read or has no API.
    """
    import boto3

    from assetflow.adapters.stack_outputs import StackOutputsError, read_stack_outputs

    session = session or boto3.session.Session()
    try:
        outputs = read_stack_outputs(cloudformation or session.client("cloudformation"), env)
    except StackOutputsError as exc:
        raise ApiClientError(f"--env {env}: {exc}") from exc
    except Exception as exc:  # credentials, region, network: one line for the operator
        raise ApiClientError(f"--env {env}: cannot read the stack's outputs: {exc}") from exc
    if not outputs.api_url:
        raise ApiClientError(f"--env {env}: stack {outputs.stack_name} has no ApiUrl output")
    return ApiClient(outputs.api_url, signer=SigV4Signer(session), origin=f"stack {outputs.stack_name}")


__all__ = [
    "ApiAnswer",
    "ApiClient",
    "ApiClientError",
    "SigV4Signer",
    "deployed_client",
    "local_client",
]
