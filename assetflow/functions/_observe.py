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


#: The largest batch log line written (CloudWatch Logs takes events up to 256 KB): longer lists are split.
LOG_LINE_BYTES = 32 * 1024


def log_batch(
    logger: Any,
    message: str,
    items: list[dict[str, Any]],
    *,
    shared: tuple[str, ...] = (),
    **facts: Any,
) -> None:
    """One INFO line for a batch's items, not one per item (a line per item was most of the log bill).

    The ``shared`` keys that every item has with one value are said once, beside ``facts``; the items follow
    as a list, split over several lines (``part`` of ``parts``) when one would exceed ``LOG_LINE_BYTES``.
    """
    if not items:
        return
    common = {
        key: items[0][key]
        for key in shared
        if key in items[0] and all(item.get(key) == items[0][key] for item in items)
    }
    rows = [{k: v for k, v in item.items() if k not in common} for item in items]
    chunks: list[list[dict[str, Any]]] = [[]]
    size = 0
    for row in rows:
        row_bytes = len(json.dumps(row, default=str)) + 1
        if chunks[-1] and size + row_bytes > LOG_LINE_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append(row)
        size += row_bytes
    for n, chunk in enumerate(chunks, start=1):
        parts = {"part": n, "parts": len(chunks)} if len(chunks) > 1 else {}
        logger.info(message, extra={**facts, **common, **parts, "items": chunk})
