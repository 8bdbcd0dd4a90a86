"""moto's server, with its SQS queues made cheap per message for bursts (``python -m assetflow_dev.moto_server``).

moto 5.2's SQS does work proportional to the queue's depth for every message sent or received: ``send_message``
reads ``queue.attributes`` (three passes over every message, each message reading the clock through
``datetime``), ``receive_message`` computes every queue attribute again for each message it returns (the
retention check), and ``delete_message`` scans the whole queue twice. A backlog of 10,000 messages then takes
the emulator hours to drain, which measures moto, not assetflow.

``patch_sqs`` keeps moto's behaviour and changes only the cost: one clock read per pass, the retention period
read from the queue, and a delete that stops at the message it deletes. The counts stay exact. It checks that
the moto it patches has what it replaces (the version is pinned in ``requirements-local.txt``).

``patch_dispatch`` keeps two things moto 5.2 works out again for every request: the list of its service
modules (read from the disk to match the request's host: a directory listing and a ``stat`` per module, a quarter
of the server's CPU in a burst) and the table of a service's error shapes (its cache is made anew each time, so
every error answer, such as S3's NoSuchKey for a run that wrote no outlet metadata, rebuilt it). It also finds a
job run by its id in a dict instead of two passes over every job run of the application (GetJobRun after
thousands of runs), and the server writes no access-log line per request (werkzeug's, a seventh of its CPU in a
burst, under a lock every request thread takes): only warnings and errors reach the emulator's log.

``patch_kinesis`` counts Kinesis puts and answers a long poll for the next one (not an AWS API), so that the
local Kinesis poller waits there while its shards are idle instead of reading each one every second.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs

#: The moto version these patches were written against and checked on.
PATCHED_MOTO = "5.2.5"


def _now_ms() -> float:
    # moto's unix_time_millis() through datetime, without the datetime objects: UTC epoch milliseconds.
    return time.time() * 1000.0


def _needs_patching(marked: Any, what: str, replaced: Sequence[tuple[Any, str]]) -> bool:
    """Whether ``what`` is still to patch (``marked`` carries the flag), checking that the patches fit this moto.

    Raises:
        RuntimeError: the installed moto is not the pinned one, or lacks what the patches replace.
    """
    import moto

    if getattr(marked, "_assetflow_patched", False):
        return False
    if moto.__version__ != PATCHED_MOTO:
        raise RuntimeError(f"assetflow patches moto {PATCHED_MOTO}'s {what}; found moto {moto.__version__}")
    for owner, name in replaced:
        if not hasattr(owner, name):
            raise RuntimeError(
                f"moto's {getattr(owner, '__name__', owner)} has no {name}: the {what} patches do not fit"
            )
    return True


def patch_sqs() -> None:
    """Replace moto's per-depth SQS paths with per-message ones; idempotent.

    Raises:
        RuntimeError: the installed moto is not the one these patches fit.
    """
    from moto.sqs import models
    from moto.sqs.exceptions import ReceiptHandleIsInvalid

    message_cls: Any = models.Message
    queue_cls: Any = models.Queue
    backend_cls: Any = models.SQSBackend
    replaced = (
        (message_cls, "visible"),
        (message_cls, "delayed"),
        (queue_cls, "messages"),
        (queue_cls, "approximate_number_of_messages"),
        (queue_cls, "delete_message"),
        (backend_cls, "is_message_valid_based_on_retention_period"),
    )
    if not _needs_patching(models, "SQS", replaced):
        return

    def visible(self: Any) -> bool:
        return bool(_now_ms() > self.visible_at)

    def delayed(self: Any) -> bool:
        return bool(_now_ms() < self.delayed_until)

    def messages(self: Any) -> list[Any]:
        now = _now_ms()
        return [m for m in self._messages if now > m.visible_at and not now < m.delayed_until]

    def number_delayed(self: Any) -> int:
        now = _now_ms()
        return sum(1 for m in self._messages if now < m.delayed_until)

    def number_not_visible(self: Any) -> int:
        now = _now_ms()
        return sum(1 for m in self._messages if not now > m.visible_at)

    def number_visible(self: Any) -> int:
        now = _now_ms()
        return sum(1 for m in self._messages if now > m.visible_at and not now < m.delayed_until)

    def delete_message(self: Any, receipt_handle: str) -> None:
        if receipt_handle in self.deleted_messages:
            return  # already deleted: deleting again is fine, as on SQS
        current: Sequence[Any] = self._messages
        for index, message in enumerate(current):
            if message.receipt_handle == receipt_handle or receipt_handle in message._old_receipt_handles:
                self.pending_messages.discard(message)
                self.deleted_messages.update(message.all_receipt_handles)
                # A new list, as moto does: a receive iterating the old one meanwhile is not disturbed.
                self._messages = [*current[:index], *current[index + 1 :]]
                return
        raise ReceiptHandleIsInvalid()

    def retention_valid(self: Any, queue_name: str, message: Any) -> bool:
        queue = self.get_queue(queue_name)
        retain_until = int(queue.message_retention_period) + message.sent_timestamp / 1000
        return bool(retain_until > time.time())

    message_cls.visible = property(visible)
    message_cls.delayed = property(delayed)
    queue_cls.messages = property(messages)
    queue_cls.approximate_number_of_messages_delayed = property(number_delayed)
    queue_cls.approximate_number_of_messages_not_visible = property(number_not_visible)
    queue_cls.approximate_number_of_messages = property(number_visible)
    queue_cls.delete_message = delete_message
    backend_cls.is_message_valid_based_on_retention_period = retention_valid
    models._assetflow_patched = True  # type: ignore[attr-defined]


def patch_dispatch() -> None:
    """Keep moto's module list and its services' error tables instead of building them per request; idempotent.

    Raises:
        RuntimeError: the installed moto is not the one these patches fit.
    """
    from moto import backends
    from moto.core import errors
    from moto.emrserverless import models

    factory: Any = errors.ErrorLookupFactory
    job_runs: Any = models.EMRServerlessBackend
    replaced = (
        (backends, "list_of_moto_modules"),
        (factory, "for_service"),
        (job_runs, "start_job_run"),
        (job_runs, "get_job_run"),
    )
    if not _needs_patching(backends, "dispatch", replaced):
        return
    modules = tuple(backends.list_of_moto_modules())  # the installed package does not change under the server
    backends.list_of_moto_modules = lambda: modules
    build = factory.for_service
    tables: dict[str, Any] = {}

    def for_service(self: Any, service_model: Any) -> Any:
        service_id = service_model.metadata.get("serviceId")
        if service_id is None:
            return build(self, service_model)
        table = tables.get(service_id)
        if table is None:
            table = tables[service_id] = build(self, service_model)
        return table

    factory.for_service = for_service
    _index_job_runs(job_runs)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    backends._assetflow_patched = True  # type: ignore[attr-defined]


def _index_job_runs(backend_cls: Any) -> None:
    """GetJobRun by a dict lookup: moto scans the application's list twice (quadratic over a burst)."""
    start, get = backend_cls.start_job_run, backend_cls.get_job_run

    def index(backend: Any) -> dict[tuple[str, str], Any]:
        found: dict[tuple[str, str], Any] | None = backend.__dict__.get("_assetflow_job_runs")
        if found is None:
            found = backend._assetflow_job_runs = {}
        return found

    def start_job_run(self: Any, application_id: str, *args: Any, **kwargs: Any) -> Any:
        job_run = start(self, application_id, *args, **kwargs)
        index(self)[(application_id, job_run.id)] = job_run
        return job_run

    def get_job_run(self: Any, application_id: str, job_run_id: str) -> Any:
        job_run = index(self).get((application_id, job_run_id))
        if job_run is None:  # moto's own answer: an unknown application or job run, or one made before
            return get(self, application_id, job_run_id)
        return job_run

    backend_cls.start_job_run = start_job_run
    backend_cls.get_job_run = get_job_run


# ---- Kinesis: a wait for the next put, so that an idle local shard is not read every second -------------------

#: Not an AWS API: ``GET <moto>/_assetflow/kinesis-puts?since=N&wait=S`` answers ``{"puts": M}``, the number of
#: PutRecord and PutRecords calls moto's Kinesis has taken, as soon as it differs from ``N`` or after ``S``
#: seconds (at most ``KINESIS_PUTS_WAIT_MAX``). The local Kinesis poller waits on it while its shards are idle.
KINESIS_PUTS_PATH = "/_assetflow/kinesis-puts"
KINESIS_PUTS_WAIT_MAX = 20.0


class _Puts:
    """A count of puts, and a wait for it to move."""

    def __init__(self) -> None:
        self.count = 0
        self._changed = threading.Condition()

    def add(self) -> None:
        with self._changed:
            self.count += 1
            self._changed.notify_all()

    def wait(self, since: int, seconds: float) -> int:
        with self._changed:
            self._changed.wait_for(lambda: self.count != since, timeout=seconds)
            return self.count


KINESIS_PUTS = _Puts()


def patch_kinesis() -> None:
    """Count moto's Kinesis puts (``KINESIS_PUTS``) and serve the wait for them; idempotent.

    Raises:
        RuntimeError: the installed moto is not the one these patches fit.
    """
    import moto.server
    from moto.kinesis import models

    backend: Any = models.KinesisBackend
    if not _needs_patching(models, "Kinesis", ((backend, "put_record"), (backend, "put_records"))):
        return
    for name in ("put_record", "put_records"):
        original = getattr(backend, name)

        def counted(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            try:
                return _original(self, *args, **kwargs)
            finally:
                KINESIS_PUTS.add()

        setattr(backend, name, counted)
    server: Any = moto.server  # the module its main() builds the application from
    application: Any = server.DomainDispatcherApplication

    class WithKinesisPuts(application):  # type: ignore[misc]
        """moto's WSGI application, answering the wait for Kinesis puts itself."""

        def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
            if environ.get("PATH_INFO") != KINESIS_PUTS_PATH:
                return super().__call__(environ, start_response)
            query = parse_qs(str(environ.get("QUERY_STRING") or ""))
            try:
                since = int(query.get("since", ["-1"])[0])
                seconds = min(max(float(query.get("wait", ["0"])[0]), 0.0), KINESIS_PUTS_WAIT_MAX)
            except ValueError:
                body, status = b'{"error": "since and wait must be numbers"}', "400 Bad Request"
            else:
                body, status = json.dumps({"puts": KINESIS_PUTS.wait(since, seconds)}).encode(), "200 OK"
            start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]

    server.DomainDispatcherApplication = WithKinesisPuts
    models._assetflow_patched = True  # type: ignore[attr-defined]


def main(argv: Sequence[str] | None = None) -> None:
    """Patch moto's SQS, dispatch and Kinesis, then run moto's server with these arguments."""
    patch_sqs()
    patch_dispatch()
    patch_kinesis()
    from moto.server import main as moto_main

    moto_main(list(argv) if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
