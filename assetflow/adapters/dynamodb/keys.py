"""DynamoDB's key and item limits, and the one way a key built from outside input is kept within them.

Most keys are made of bounded parts (pipeline ids, alias names, partition keys, derived ids: see
``core.limits``). A few hold a value of the outside world that can be longer than a key may be: an asset URI
(1,500 characters) in an index's sort key, a message's identity (a Kafka topic, a cluster's brokers, an SQS
message id) in a dedupe record's partition key or the quarantine's sort key, an API caller's ARN with an
``Idempotency-Key``. Those go through :func:`bounded`: unchanged when they fit (so existing items keep their
keys), otherwise cut on a character boundary and suffixed with the SHA-256 of the whole value, so two values
never share a key and the order of the readable part is kept.
"""

from __future__ import annotations

import hashlib

#: A partition key (the table's, or a global secondary index's) holds at most this many UTF-8 bytes.
MAX_PARTITION_KEY_BYTES = 2048
#: A sort key (the table's, or an index's) holds at most this many UTF-8 bytes.
MAX_SORT_KEY_BYTES = 1024
#: An item holds at most 400 KB: attribute names and values, in UTF-8.
MAX_ITEM_BYTES = 400 * 1024

_DIGEST_CHARS = 64  # hex SHA-256
_SEPARATOR = "#~"


def utf8_size(value: str) -> int:
    """The size of a string attribute, as DynamoDB counts it."""
    return len(value.encode("utf-8", "surrogatepass"))


def bounded(value: str, limit: int, *, prefix: str = "") -> str:
    """``prefix + value`` when it fits in ``limit`` UTF-8 bytes; otherwise a key of exactly that many or fewer.

    The long form is ``prefix + <the longest head of value that fits> + "#~" + sha256(value)``: deterministic,
    distinct for distinct values, and sorted by its head.

    Raises:
        ValueError: ``prefix`` alone leaves no room for the long form.
    """
    key = prefix + value
    if utf8_size(key) <= limit:
        return key
    room = limit - utf8_size(prefix) - len(_SEPARATOR) - _DIGEST_CHARS
    if room < 0:
        raise ValueError(f"a key prefix of {utf8_size(prefix)} bytes leaves no room within {limit} bytes")
    head = value.encode("utf-8", "surrogatepass")[:room].decode("utf-8", "ignore")
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{prefix}{head}{_SEPARATOR}{digest}"


def partition_key(prefix: str, value: str) -> str:
    """A partition key ``prefix + value`` within DynamoDB's 2,048 bytes."""
    return bounded(value, MAX_PARTITION_KEY_BYTES, prefix=prefix)


def sort_key(prefix: str, value: str) -> str:
    """A sort key ``prefix + value`` within DynamoDB's 1,024 bytes."""
    return bounded(value, MAX_SORT_KEY_BYTES, prefix=prefix)


__all__ = [
    "MAX_ITEM_BYTES",
    "MAX_PARTITION_KEY_BYTES",
    "MAX_SORT_KEY_BYTES",
    "bounded",
    "partition_key",
    "sort_key",
    "utf8_size",
]
