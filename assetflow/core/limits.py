"""Every size and shape limit on data entering assetflow, defined once, with the checks that apply them.

The limits follow from where the data goes: an event is written whole into DynamoDB items (400 KB each: the
event, its dedupe record, queue entries, inline run triggers) and EventBridge entries (256 KB); keys go into
DynamoDB key attributes (a sort key holds at most 1,024 bytes); a transaction holds at most 100 items.
Ingest and the API check what they take against these, so that nothing stored can later fail to be
written again, and a refusal names the limit.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from assetflow.core.errors import AssetflowError

# ---- extras ----------------------------------------------------------------------------------------------

#: The largest extra (canonical JSON) an event carries inline when an extras store is configured; larger
#: ones go to the store and the event carries a reference. 32 KiB keeps an event far below EventBridge's
#: 256 KB entry and DynamoDB's 400 KB item, however many times it is copied.
INLINE_EXTRA_BYTES = 32 * 1024
#: The hard ceiling of an extra stored by reference; larger messages are quarantined and requests refused,
#: never truncated (Lambda's own 6 MB payload limit keeps real messages below it).
MAX_EXTRA_BYTES_BY_REFERENCE = 10 * 1024 * 1024
#: Without an extras store (no runs bucket: tests, embedded use), the largest extra of a message: written
#: twice (the event and its dedupe record), 256 KiB leaves room for keys and the rest of the event.
MAX_MESSAGE_EXTRA_BYTES = 256 * 1024
#: Without an extras store, the largest extra of an API or CLI request (the request body is smaller still).
MAX_REQUEST_EXTRA_BYTES = 64 * 1024
#: Source facts kept next to a reference when they fit in this many bytes of JSON; otherwise each fact
#: larger than ``FACT_SUMMARY_BYTES`` is replaced by its size (the whole fact is in the store).
MAX_INLINE_FACTS_BYTES = 8 * 1024
FACT_SUMMARY_BYTES = 1024

# ---- requests and messages -------------------------------------------------------------------------------

#: The largest API request body without an extras store (room for a pretty-printed extra of the limit).
MAX_REQUEST_BODY_BYTES = 128 * 1024
#: The largest API request body with an extras store: Lambda takes 6 MB, and base64 grows a body by a third.
MAX_REQUEST_BODY_BYTES_BY_REFERENCE = 4 * 1024 * 1024
#: The deepest nesting of a request's extra: deeper documents are mistakes, and cost recursion.
MAX_EXTRA_DEPTH = 32
#: The deepest nesting of a message's JSON payload: filters, schemas and (de)serialisation recurse, and
#: Python's recursion limit must not decide what happens to a message.
MAX_PAYLOAD_DEPTH = 64
#: The most of a quarantined message's body that is kept (the quarantine record is one item too).
MAX_QUARANTINE_BODY_BYTES = 256 * 1024
#: The most of a quarantined message's facts (JSON) that is kept; larger values become their size.
MAX_QUARANTINE_FACTS_BYTES = 64 * 1024

# ---- keys ------------------------------------------------------------------------------------------------

#: The longest partition key, in UTF-8 bytes: it becomes part of queue keys (DynamoDB sort keys, 1,024
#: bytes at most, beside the pipeline id and prefixes).
MAX_PARTITION_KEY_BYTES = 256
#: Items one DynamoDB transaction holds.
MAX_TRANSACTION_ITEMS = 100

_PATH_SEPARATORS = frozenset("/\\")


class LimitError(AssetflowError, ValueError):
    """A value is over a limit or of a shape assetflow refuses; the message says which and how to fix it."""


def check_partition_key(key: Any, *, what: str = "partition_key") -> str:
    """Return ``key`` when it is a usable partition key.

    A partition key is a non-blank string of at most ``MAX_PARTITION_KEY_BYTES`` UTF-8 bytes, without path
    separators (it names folders and objects in jobs: ``../../x`` must not escape them) or control and
    format characters (a newline would forge lines in a job's logs).

    Raises:
        LimitError: the key is not a string, is blank, too long, or holds a refused character.
    """
    if not isinstance(key, str):
        raise LimitError(f"{what} must be a string, not {type(key).__name__}")
    if not key.strip():
        raise LimitError(f"{what} must be a non-empty string: it is empty")
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise LimitError(f"{what} is not valid Unicode text (an unpaired surrogate)") from exc
    if size > MAX_PARTITION_KEY_BYTES:
        raise LimitError(
            f"{what} is {size} bytes long (UTF-8), over the limit of {MAX_PARTITION_KEY_BYTES} bytes"
        )
    for char in key:
        if char in _PATH_SEPARATORS:
            raise LimitError(f"{what} must not contain {char!r} (keys name folders in jobs)")
        if unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp"):
            raise LimitError(f"{what} must not contain control characters such as {char!r}")
    return key


def nesting_exceeds(value: Any, limit: int) -> bool:
    """Whether a JSON value nests objects and arrays deeper than ``limit`` (iteratively: no recursion)."""
    stack = [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict | list):
            if level > limit:
                return True
            stack.extend((child, level + 1) for child in (node.values() if isinstance(node, dict) else node))
    return False


__all__ = [
    "FACT_SUMMARY_BYTES",
    "INLINE_EXTRA_BYTES",
    "MAX_EXTRA_BYTES_BY_REFERENCE",
    "MAX_EXTRA_DEPTH",
    "MAX_INLINE_FACTS_BYTES",
    "MAX_MESSAGE_EXTRA_BYTES",
    "MAX_PARTITION_KEY_BYTES",
    "MAX_PAYLOAD_DEPTH",
    "MAX_QUARANTINE_BODY_BYTES",
    "MAX_QUARANTINE_FACTS_BYTES",
    "MAX_REQUEST_BODY_BYTES",
    "MAX_REQUEST_BODY_BYTES_BY_REFERENCE",
    "MAX_REQUEST_EXTRA_BYTES",
    "MAX_TRANSACTION_ITEMS",
    "LimitError",
    "check_partition_key",
    "nesting_exceeds",
]
