"""What the handlers share to report: their metrics, as EMF documents in the function's log."""

from __future__ import annotations

import json
import sys
from typing import IO, Any

#: Where EMF documents go: stdout, which Lambda hands to CloudWatch Logs (where EMF becomes metrics). The
#: local runtime points it at its function log, next to the functions' log lines.
stream: IO[str] | None = None


def flush_metrics(metrics: Any) -> None:
    """Write the metrics added so far as one EMF document (nothing when none were added), and clear them."""
    if not metrics.metric_set:
        return
    document = metrics.serialize_metric_set()
    metrics.clear_metrics()
    print(json.dumps(document, separators=(",", ":")), file=stream or sys.stdout, flush=True)
