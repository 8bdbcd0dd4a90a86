"""The reconciliation Lambda: a scheduled sweep that repairs what lost state changes and refusals left behind."""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from assetflow.composition import Dependencies, dependencies

SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME") or "assetflow-reconcile"
logger = Logger(service=SERVICE)
metrics = Metrics(namespace="assetflow", service=SERVICE)

#: The metrics of one sweep (namespace ``assetflow``, dimension ``service``); the stack alarms on the first
#: (something needed repairing) and the last (the sweep itself failed on some run or pipeline).
REPAIRED_METRIC = "RunsRepaired"
#: Messages a source holds that nothing recorded (the SQS watchers' dead letters), for `assetflow reconcile`.
SOURCES_METRIC = "SourceMessagesMissing"
ERRORS_METRIC = "SweepErrors"
_COUNTS = {
    "RunsFinished": "finished",
    "RunsStarted": "started",
    "RunsResubmitted": "resubmitted",
    "RunsFailedRefused": "failed_refused",
    "RunsReleased": "released",
    "JobRunsUnknown": "unknown_job_runs",
}


@logger.inject_lambda_context
def lambda_handler(
    event: dict[str, Any] | None, context: LambdaContext, deps: Dependencies | None = None
) -> dict[str, Any]:
    """Run one sweep (``{"dry_run": true}`` writes nothing) and publish what it repaired as metrics.

    The scheduled invocation sends ``{}``; ``assetflow reconcile-runs`` invokes it by hand. Per-run failures
    are counted in ``SweepErrors`` and the sweep goes on; the next one tries again.

    Raises:
        ValueError: ``dry_run`` is not a boolean.
        StoreUnavailableError: the store is unavailable as a whole (the invocation is retried).
    """
    dry_run = (event or {}).get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise ValueError("dry_run must be true or false")
    resolved = deps or dependencies()
    report = resolved.reconciler.sweep(dry_run=dry_run)
    doc = report.to_json()
    if resolved.settings.watcher_dead_letters:
        # What the sources hold that nothing recorded (dead letters): counted, for `assetflow reconcile`.
        try:
            sources = resolved.source_reconciler.reconcile(dry_run=True)
        except Exception:  # the sweep's own repairs stand; the next sweep counts again
            logger.warning("sources not reconciled", exc_info=True)
        else:
            doc["sources"] = sources.to_json()
            if not dry_run:
                metrics.add_metric(name=SOURCES_METRIC, unit=MetricUnit.Count, value=sources.found)
    if not dry_run and resolved.expectations.expected():
        # Each expected asset keeps one pending deadline check; one lost after its retries is made again here.
        try:
            doc["deadline_checks"] = len(resolved.expectations.schedule_all())
        except Exception:  # the sweep's own repairs stand; the next sweep tries again
            logger.warning("deadline checks not scheduled", exc_info=True)
            metrics.add_metric(name=ERRORS_METRIC, unit=MetricUnit.Count, value=1)
    if not dry_run:
        metrics.add_metric(name=REPAIRED_METRIC, unit=MetricUnit.Count, value=report.repaired)
        metrics.add_metric(name=ERRORS_METRIC, unit=MetricUnit.Count, value=len(report.errors))
        for name, attribute in _COUNTS.items():
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=getattr(report, attribute))
        metrics.flush_metrics()
    return doc
