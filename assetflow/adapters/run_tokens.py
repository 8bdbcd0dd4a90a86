"""Per-run secrets: where a run's job writes its outlet metadata is known to that run alone.

EMR Serverless runs every job of an application under one execution role and passes no job run tags to its
session, so IAM cannot tell one run's writes from another's. The run-state function therefore reads a run's
outlet metadata from ``runs/<pipeline>/<run_id>/<token>/outlets.json``, where ``token`` is an HMAC of the run
id under a KMS key that only the functions may use (``GenerateMac``; the jobs' role may not): the submitter
passes the place in the job's arguments only (not in the run context, which other jobs can read), and the jobs'
role may neither list ``runs/`` nor read another run's arguments. A job can write nothing that another run's
metadata is read from.
"""

from __future__ import annotations

import base64
import threading
from collections import OrderedDict
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from assetflow.core.errors import AssetflowError

_MEMO_SIZE = 4096
_RETRYABLE = frozenset({"ThrottlingException", "KMSInternalException", "DependencyTimeoutException"})


class RunTokenUnavailableError(AssetflowError):
    """KMS is throttling or failing; the run's submission or its outlets' read is retried later."""


class KmsRunTokens:
    """``token(run_id)``: the HMAC-SHA-256 of the run id under a KMS HMAC key, URL-safe (memoised)."""

    def __init__(self, kms_client: Any, key_id: str) -> None:
        if not key_id:
            raise ValueError("a run token key is needed")
        self._kms = kms_client
        self.key_id = key_id
        self._memo: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def token(self, run_id: str) -> str:
        """The run's token: the same on every call, for every function, as long as the key lives.

        Raises:
            RunTokenUnavailableError: KMS throttled or failed.
            botocore.exceptions.ClientError: KMS refused (access, a disabled key).
        """
        with self._lock:
            known = self._memo.get(run_id)
        if known is not None:
            return known
        try:
            mac = self._kms.generate_mac(
                KeyId=self.key_id, Message=run_id.encode(), MacAlgorithm="HMAC_SHA_256"
            )["Mac"]
        except BotoCoreError as exc:
            raise RunTokenUnavailableError(f"GenerateMac: {exc}") from exc
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in _RETRYABLE:
                raise RunTokenUnavailableError(f"GenerateMac: {exc}") from exc
            raise
        token = base64.urlsafe_b64encode(mac).decode().rstrip("=")
        with self._lock:
            self._memo[run_id] = token
            while len(self._memo) > _MEMO_SIZE:
                self._memo.popitem(last=False)
        return token


__all__ = ["KmsRunTokens", "RunTokenUnavailableError"]
