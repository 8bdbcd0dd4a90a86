"""One-shot re-evaluations of a queue as EventBridge Scheduler one-time schedules (the ``WakeUps`` port).

The same one-time schedules check an expected asset at its next deadline (the ``Deadlines`` port):
``{"expectation", "deadline"}`` to the same tick function.

A debounce or max-wait deadline becomes an ``at(yyyy-mm-ddThh:mm:ss)`` schedule in UTC, in the stack's
wake-up group, invoking the tick function with ``{"pipeline", "queue_key", "wake_at"}``, and deleting itself
after it ran (``ActionAfterCompletion: DELETE``). Its name derives from the queue and the deadline, so asking
twice for the same wake-up creates one schedule (the second create is a ``ConflictException``).
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from assetflow.core.errors import StoreUnavailableError
from assetflow.core.events import format_timestamp

logger = logging.getLogger(__name__)

_RETRYABLE = frozenset({"ThrottlingException", "InternalServerException", "ServiceQuotaExceededException"})
#: A wake-up never lands sooner than this after it is asked for (Scheduler refuses times in the past).
MIN_LEAD = timedelta(seconds=1)


def wake_schedule_name(pipeline: str, key: str, when: datetime) -> str:
    """The schedule's name: ``wake-`` and a digest of the queue and the deadline (64 characters at most)."""
    digest = hashlib.sha256(f"{pipeline}\x1f{key}\x1f{format_timestamp(when)}".encode()).hexdigest()[:40]
    return f"wake-{pipeline[:18]}-{digest}"


def expect_schedule_name(uri: str, when: datetime) -> str:
    """A deadline check's schedule name: ``expect-`` and a digest of the asset and the deadline."""
    digest = hashlib.sha256(f"{uri}\x1f{format_timestamp(when)}".encode()).hexdigest()[:40]
    return f"expect-{digest}"


class EventBridgeSchedulerWakeUps:
    """Creates one-time schedules that invoke the tick function at a queue's deadline."""

    def __init__(
        self,
        client: Any,
        *,
        group: str,
        role_arn: str,
        target_arn: str | None,
        dead_letter_arn: str | None = None,
        clock: Any = None,
    ) -> None:
        self._scheduler = client
        self.group = group
        self.role_arn = role_arn
        #: The tick function's ARN; the tick function binds its own at run time (see ``bind_target``).
        self.target_arn = target_arn
        self.dead_letter_arn = dead_letter_arn
        self._clock = clock or (lambda: datetime.now(UTC))

    def bind_target(self, arn: str) -> None:
        """Set the target when the environment could not name it (the tick function itself)."""
        if self.target_arn is None:
            self.target_arn = arn

    def wake_at(self, pipeline: str, key: str, when: datetime) -> None:
        """Create the one-time schedule; an existing one of the same name is the same wake-up.

        Raises:
            StoreUnavailableError: Scheduler is throttling or failing; retry.
            ValueError: no target to invoke.
        """
        self._create(
            wake_schedule_name(pipeline, key, when),
            when,
            {"pipeline": pipeline, "queue_key": key, "wake_at": format_timestamp(when)},
            f"assetflow wake-up of {pipeline}/{key or '-'} at {format_timestamp(when)}",
        )
        logger.info(
            "wake-up scheduled", extra={"pipeline": pipeline, "queue_key": key, "at": format_timestamp(when)}
        )

    def check_at(self, uri: str, when: datetime) -> None:
        """The ``Deadlines`` port: a one-time schedule checking ``uri``'s expected arrival at ``when``.

        Its input is ``{"expectation": URI, "deadline": ISO-8601}``; its name derives from the asset and the
        deadline, so each expectation has one pending check whatever asks for it.

        Raises:
            StoreUnavailableError: Scheduler is throttling or failing; retry.
            ValueError: no target to invoke.
        """
        self._create(
            expect_schedule_name(uri, when),
            when,
            {"expectation": uri, "deadline": format_timestamp(when)},
            f"assetflow expected arrival of {uri[:120]} at {format_timestamp(when)}",
        )
        logger.info("deadline check scheduled", extra={"asset": uri, "at": format_timestamp(when)})

    def _create(self, name: str, when: datetime, payload: dict[str, Any], description: str) -> None:
        if self.target_arn is None:
            raise ValueError("no wake-up target: WAKE_TARGET_ARN is not set")
        # Scheduler's at() takes whole seconds; rounding up never wakes a queue before its deadline.
        at = max(when.astimezone(UTC), self._clock() + MIN_LEAD)
        at = at.replace(microsecond=0) + (timedelta(seconds=1) if at.microsecond else timedelta())
        target: dict[str, Any] = {
            "Arn": self.target_arn,
            "RoleArn": self.role_arn,
            "Input": json.dumps(payload),
            "RetryPolicy": {"MaximumRetryAttempts": 5, "MaximumEventAgeInSeconds": 3600},
        }
        if self.dead_letter_arn:
            target["DeadLetterConfig"] = {"Arn": self.dead_letter_arn}
        try:
            self._scheduler.create_schedule(
                Name=name,
                GroupName=self.group,
                ScheduleExpression=f"at({at.strftime('%Y-%m-%dT%H:%M:%S')})",
                ScheduleExpressionTimezone="UTC",
                FlexibleTimeWindow={"Mode": "OFF"},
                ActionAfterCompletion="DELETE",
                Target=target,
                Description=description[:512],
            )
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code == "ConflictException":
                return  # already scheduled
            if code in _RETRYABLE:
                raise StoreUnavailableError(f"CreateSchedule {name}: {code}") from exc
            raise
        except BotoCoreError as exc:
            raise StoreUnavailableError(f"CreateSchedule {name}: {exc}") from exc


__all__ = ["MIN_LEAD", "EventBridgeSchedulerWakeUps", "expect_schedule_name", "wake_schedule_name"]
