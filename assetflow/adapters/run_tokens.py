"""Per-run secrets: where a run's job writes its outlet metadata is known to that run alone.

EMR Serverless runs every job of an application under one execution role and passes no job run tags to its
session, so IAM cannot tell one run's writes from another's. The run-state function therefore reads a run's
outlet metadata from ``runs/<pipeline>/<run_id>/<token>/outlets.json``, where ``token`` is an HMAC of the run
id under a KMS key that only the functions may use (``GenerateMac``; the jobs' role may not): the submitter
passes the place in the job's arguments only (not in the run context, which other jobs can read), and the jobs'
role may neither list ``runs/`` nor read another run's arguments. A job can write nothing that another run's
metadata is read from.

Two schemes (a run keeps the one it was made with, ``Run.outlet_token_scheme``):

- 2 (runs made now): the HMAC of the run id under a key that each function derives once, as the KMS MAC of a
  fixed label. One KMS request per process, not two per run: at $0.03 per 10,000 requests a MAC per run cost
  about $6 per million runs, and KMS's request quota (shared by the account) would cap runs per second.
- 1 (runs made before): the KMS MAC of the run id itself, one request per run (memoised).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading
from collections import OrderedDict
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from assetflow.core.errors import AssetflowError
from assetflow.core.events import OUTLET_TOKEN_SCHEME

_MEMO_SIZE = 4096
#: What scheme 2 derives its key from: the KMS MAC of this label (changing it moves every run's place).
_DERIVATION_LABEL = b"assetflow/run-tokens/v2"
_RETRYABLE = frozenset({"ThrottlingException", "KMSInternalException", "DependencyTimeoutException"})


class RunTokenUnavailableError(AssetflowError):
    """KMS is throttling or failing; the run's submission or its outlets' read is retried later."""


class KmsRunTokens:
    """``token(run_id, scheme=...)``: a run's token, URL-safe, under a KMS HMAC key (see the module's docstring)."""

    def __init__(self, kms_client: Any, key_id: str) -> None:
        if not key_id:
            raise ValueError("a run token key is needed")
        self._kms = kms_client
        self.key_id = key_id
        self._memo: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()
        self._derived: bytes | None = None
        self._deriving = threading.Lock()

    def token(self, run_id: str, *, scheme: int = OUTLET_TOKEN_SCHEME) -> str:
        """The run's token: the same on every call, for every function, as long as the key lives.

        Raises:
            RunTokenUnavailableError: KMS throttled or failed.
            botocore.exceptions.ClientError: KMS refused (access, a disabled key).
            ValueError: an unknown scheme.
        """
        if scheme == OUTLET_TOKEN_SCHEME:
            mac = hmac.new(self._derived_key(), run_id.encode(), hashlib.sha256).digest()
            return _urlsafe(mac)
        if scheme != 1:
            raise ValueError(f"unknown run token scheme {scheme!r}")
        with self._lock:
            known = self._memo.get(run_id)
        if known is not None:
            return known
        token = _urlsafe(self._mac(run_id.encode()))
        with self._lock:
            self._memo[run_id] = token
            while len(self._memo) > _MEMO_SIZE:
                self._memo.popitem(last=False)
        return token

    def _derived_key(self) -> bytes:
        """Scheme 2's key: the KMS MAC of a fixed label, asked for once (the submissions of a batch at once wait)."""
        derived = self._derived
        if derived is None:
            with self._deriving:
                derived = self._derived
                if derived is None:
                    derived = self._derived = self._mac(_DERIVATION_LABEL)
        return derived

    def _mac(self, message: bytes) -> bytes:
        try:
            return bytes(
                self._kms.generate_mac(KeyId=self.key_id, Message=message, MacAlgorithm="HMAC_SHA_256")["Mac"]
            )
        except BotoCoreError as exc:
            raise RunTokenUnavailableError(f"GenerateMac: {exc}") from exc
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in _RETRYABLE:
                raise RunTokenUnavailableError(f"GenerateMac: {exc}") from exc
            raise


def _urlsafe(mac: bytes) -> str:
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


__all__ = ["KmsRunTokens", "RunTokenUnavailableError"]
