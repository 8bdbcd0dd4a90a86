"""Asset watchers: the sources (SQS, Kafka, S3 objects, EventBridge events, Kinesis) whose messages become events."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any, Literal

from assetflow.core.errors import DefinitionError, DocumentError
from assetflow.core.filters import validate_pattern
from assetflow.core.jsonvalue import freeze_json, thaw_json

_WATCHER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# up to 80 characters: a standard name, or a FIFO name of up to 75 characters and ".fifo"
_QUEUE_NAME = re.compile(r"^([A-Za-z0-9_-]{1,80}|[A-Za-z0-9_-]{1,75}\.fifo)$")
_SQS_ARN = re.compile(
    r"^arn:aws[a-z-]*:sqs:[a-z0-9-]+:\d{12}:([A-Za-z0-9_-]{1,80}|[A-Za-z0-9_-]{1,75}\.fifo)$"
)
_MSK_ARN = re.compile(r"^arn:aws[a-z-]*:kafka:[a-z0-9-]+:\d{12}:cluster/[A-Za-z0-9-]+/[A-Za-z0-9-]+(-\d+)?$")
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_BROKER = re.compile(r"^[A-Za-z0-9.-]+:\d{1,5}$")
_FIELD_PATH = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
# S3's bucket naming rules (general purpose buckets): 3-63 characters, lower-case letters, digits, '.' and '-'.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_EVENT_BUS = re.compile(r"^[A-Za-z0-9._/-]{1,256}$")
_EVENT_BUS_ARN = re.compile(r"^arn:aws[a-z-]*:events:[a-z0-9-]+:\d{12}:event-bus/[A-Za-z0-9._/-]{1,256}$")
_STREAM_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_STREAM_ARN = re.compile(r"^arn:aws[a-z-]*:kinesis:[a-z0-9-]+:\d{12}:stream/([A-Za-z0-9_.-]{1,128})$")
#: The longest object key S3 accepts, in bytes of UTF-8.
_MAX_KEY_BYTES = 1024


def _hashable(value: Any) -> Any:
    """A hashable stand-in for a frozen JSON value that is equal wherever the values are equal."""
    if isinstance(value, Mapping):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, tuple | list):
        return tuple(_hashable(v) for v in value)
    return value


def _reduce_source(source: WatcherSource) -> tuple[Any, ...]:
    args = tuple(
        thaw_json(getattr(source, f.name))
        if f.name in ("filter", "schema", "pattern")
        else getattr(source, f.name)
        for f in fields(source)
    )
    return (type(source), args)


def _check_common(what: str, filter: Any, schema: Any, partition_key_field: Any) -> tuple[Any, Any]:
    if filter is not None:
        validate_pattern(filter, f"{what} filter")
    if schema is not None and (not isinstance(schema, Mapping) or not schema):
        raise DefinitionError(f"{what}: schema must be a JSON Schema given as a non-empty dict")
    if partition_key_field is not None and (
        not isinstance(partition_key_field, str) or not _FIELD_PATH.match(partition_key_field)
    ):
        raise DefinitionError(
            f"{what}: partition_key_field must be a dotted path into the payload such as 'meta.day', "
            f"got {partition_key_field!r}"
        )
    frozen_filter = freeze_json(dict(filter), f"{what} filter") if filter is not None else None
    frozen_schema = freeze_json(dict(schema), f"{what} schema") if schema is not None else None
    return frozen_filter, frozen_schema


@dataclass(frozen=True)
class SqsQueue:
    """An SQS queue to watch: one the stack creates (``name``) or an existing one (``arn``).

    ``filter`` is a content pattern on the JSON payload and ``schema`` a JSON Schema; messages that fail
    either are quarantined with the reason, never dropped. ``partition_key_field`` names the payload field
    whose value becomes the event's partition key.

    Raises:
        DefinitionError: the queue settings are invalid.

    """

    name: str | None = None
    arn: str | None = None
    fifo: bool | None = None
    batch_size: int = 10
    max_batching_window_seconds: int = 0
    filter: Mapping[str, Any] | None = None
    schema: Mapping[str, Any] | None = None
    partition_key_field: str | None = None

    def __post_init__(self) -> None:
        what = f"SqsQueue({self.name or self.arn!r})"
        if (self.name is None) == (self.arn is None):
            raise DefinitionError(
                f"{what}: give exactly one of name= (a queue the stack creates) or arn= (an existing queue)"
            )
        queue_name = self.name
        if self.arn is not None:
            match = _SQS_ARN.match(self.arn)
            if not match:
                raise DefinitionError(
                    f"{what}: not an SQS queue ARN (arn:aws:sqs:<region>:<account>:<queue>)"
                )
            queue_name = match.group(1)
        elif not _QUEUE_NAME.match(self.name or ""):
            raise DefinitionError(
                f"{what}: a queue name has 1-80 characters of letters, digits, - and _ (FIFO names end in .fifo)"
            )
        named_fifo = (queue_name or "").endswith(".fifo")
        if self.fifo is None:
            object.__setattr__(self, "fifo", named_fifo)
        elif self.fifo != named_fifo:
            raise DefinitionError(f"{what}: FIFO queue names end in '.fifo' and only FIFO queue names do")
        limit = 10 if self.fifo else 10_000
        if not 1 <= self.batch_size <= limit:
            raise DefinitionError(f"{what}: batch_size must be between 1 and {limit} for this queue type")
        if not 0 <= self.max_batching_window_seconds <= 300:
            raise DefinitionError(f"{what}: max_batching_window_seconds must be between 0 and 300")
        if self.batch_size > 10 and self.max_batching_window_seconds == 0:
            raise DefinitionError(
                f"{what}: a batch_size above 10 needs max_batching_window_seconds of at least 1"
            )
        if self.fifo and self.max_batching_window_seconds:
            raise DefinitionError(f"{what}: FIFO queues do not support a batching window")
        frozen_filter, frozen_schema = _check_common(what, self.filter, self.schema, self.partition_key_field)
        object.__setattr__(self, "filter", frozen_filter)
        object.__setattr__(self, "schema", frozen_schema)

    def __hash__(self) -> int:
        # filter and schema are mappingproxies, which do not hash
        return hash(_hashable(self.to_json()))

    def __reduce__(self) -> tuple[Any, ...]:
        # copy, deepcopy and pickle rebuild through __init__ (mappingproxies cannot be copied)
        return _reduce_source(self)

    @property
    def queue_name(self) -> str:
        """The queue's name, from ``name`` or from the ARN."""
        if self.name is not None:
            return self.name
        return self.arn.rsplit(":", 1)[1]  # type: ignore[union-attr]

    def to_json(self) -> dict[str, Any]:
        """The catalog document's SOURCE shape."""
        return {
            "type": "sqs",
            "queue": self.name,
            "queue_arn": self.arn,
            "fifo": self.fifo,
            "batch_size": self.batch_size,
            "max_batching_window_seconds": self.max_batching_window_seconds,
            "filter": thaw_json(self.filter),
            "schema": thaw_json(self.schema),
            "partition_key_field": self.partition_key_field,
        }


@dataclass(frozen=True)
class MskCluster:
    """An Amazon MSK cluster, by ARN."""

    cluster_arn: str

    def __post_init__(self) -> None:
        if not _MSK_ARN.match(self.cluster_arn):
            raise DefinitionError(
                f"MskCluster: {self.cluster_arn!r} is not an MSK cluster ARN "
                "(arn:aws:kafka:<region>:<account>:cluster/<name>/<uuid>)"
            )

    def to_json(self) -> dict[str, Any]:
        """``{"type": "msk", "cluster_arn": ...}``."""
        return {"type": "msk", "cluster_arn": self.cluster_arn}


@dataclass(frozen=True)
class SelfManagedKafka:
    """A self-managed Kafka cluster, by its bootstrap servers."""

    bootstrap_servers: tuple[str, ...]

    def __post_init__(self) -> None:
        servers = (
            (self.bootstrap_servers,) if isinstance(self.bootstrap_servers, str) else self.bootstrap_servers
        )
        object.__setattr__(self, "bootstrap_servers", tuple(servers))
        if not self.bootstrap_servers or not all(_BROKER.match(s) for s in self.bootstrap_servers):
            raise DefinitionError(
                f"SelfManagedKafka: bootstrap servers must be host:port, got {self.bootstrap_servers!r}"
            )
        for server in self.bootstrap_servers:
            port = int(server.rsplit(":", 1)[1])
            if not 1 <= port <= 65535:
                raise DefinitionError(f"SelfManagedKafka: {server!r}: the port must be between 1 and 65535")

    def to_json(self) -> dict[str, Any]:
        """``{"type": "self_managed", "bootstrap_servers": [...]}``."""
        return {"type": "self_managed", "bootstrap_servers": list(self.bootstrap_servers)}


KafkaCluster = MskCluster | SelfManagedKafka


@dataclass(frozen=True)
class KafkaTopic:
    """A Kafka topic to watch on MSK or a self-managed cluster.

    ``cluster=None`` means the environment's default cluster (set in the deployment config; the local
    runtime's own broker). Filter, schema and partition key work as for :class:`SqsQueue`.

    Raises:
        DefinitionError: the topic settings are invalid.

    """

    topic: str
    cluster: KafkaCluster | None = None
    consumer_group_id: str | None = None
    starting_position: Literal["LATEST", "TRIM_HORIZON"] = "LATEST"
    batch_size: int = 100
    filter: Mapping[str, Any] | None = None
    schema: Mapping[str, Any] | None = None
    partition_key_field: str | None = None

    def __post_init__(self) -> None:
        what = f"KafkaTopic({self.topic!r})"
        if not isinstance(self.topic, str) or not _TOPIC.match(self.topic) or self.topic in (".", ".."):
            raise DefinitionError(
                f"{what}: a topic name has 1-249 characters of letters, digits, '.', '_' and '-'"
            )
        if self.cluster is not None and not isinstance(self.cluster, MskCluster | SelfManagedKafka):
            raise DefinitionError(f"{what}: cluster must be MskCluster(...) or SelfManagedKafka(...)")
        if self.consumer_group_id is not None and not re.match(
            r"^[A-Za-z0-9._-]{1,200}$", self.consumer_group_id
        ):
            raise DefinitionError(f"{what}: consumer_group_id has 1-200 letters, digits, '.', '_' or '-'")
        if self.starting_position not in ("LATEST", "TRIM_HORIZON"):
            raise DefinitionError(f"{what}: starting_position is 'LATEST' or 'TRIM_HORIZON'")
        if not 1 <= self.batch_size <= 10_000:
            raise DefinitionError(f"{what}: batch_size must be between 1 and 10000")
        frozen_filter, frozen_schema = _check_common(what, self.filter, self.schema, self.partition_key_field)
        object.__setattr__(self, "filter", frozen_filter)
        object.__setattr__(self, "schema", frozen_schema)

    def __hash__(self) -> int:
        # filter and schema are mappingproxies, which do not hash
        return hash(_hashable(self.to_json()))

    def __reduce__(self) -> tuple[Any, ...]:
        # copy, deepcopy and pickle rebuild through __init__ (mappingproxies cannot be copied)
        return _reduce_source(self)

    def to_json(self) -> dict[str, Any]:
        """The catalog document's SOURCE shape."""
        return {
            "type": "kafka",
            "topic": self.topic,
            "cluster": self.cluster.to_json() if self.cluster else None,
            "consumer_group_id": self.consumer_group_id,
            "starting_position": self.starting_position,
            "batch_size": self.batch_size,
            "filter": thaw_json(self.filter),
            "schema": thaw_json(self.schema),
            "partition_key_field": self.partition_key_field,
        }


def _escape_wildcard(text: str) -> str:
    return text.replace("\\", "\\\\").replace("*", "\\*")


@dataclass(frozen=True)
class S3ObjectCreated:
    """Objects created in an S3 bucket (under ``prefix``, ending in ``suffix``): one event per object version.

    On AWS the bucket sends its events to EventBridge and a rule per watcher (this pattern) delivers them to
    the watcher's ingest; objects already in the bucket when the watcher starts make no event (Airflow's S3
    key trigger fires again for them). An event's extra holds ``bucket``, ``key`` (decoded), ``size``, ``etag``
    and ``version_id`` where the bucket has versions; ``filter``, ``schema`` and ``partition_key_field`` apply to
    that object description.

    Raises:
        DefinitionError: the bucket name, prefix, suffix or settings are invalid.

    """

    bucket: str
    prefix: str = ""
    suffix: str = ""
    batch_size: int = 10
    filter: Mapping[str, Any] | None = None
    schema: Mapping[str, Any] | None = None
    partition_key_field: str | None = None

    def __post_init__(self) -> None:
        what = f"S3ObjectCreated({self.bucket!r})"
        if not isinstance(self.bucket, str) or not _BUCKET.match(self.bucket) or ".." in self.bucket:
            raise DefinitionError(
                f"{what}: a bucket name has 3-63 characters of lower-case letters, digits, '.' and '-', "
                "starting and ending with a letter or digit (give the name, not an s3:// URI or an ARN)"
            )
        for name in ("prefix", "suffix"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise DefinitionError(f"{what}: {name} must be a string, not {type(value).__name__}")
            if len(value.encode("utf-8", "surrogatepass")) > _MAX_KEY_BYTES:
                raise DefinitionError(f"{what}: {name} is longer than an S3 key ({_MAX_KEY_BYTES} bytes)")
        if self.prefix.startswith("/"):
            raise DefinitionError(
                f"{what}: prefix {self.prefix!r} starts with '/'; S3 keys have no leading slash (write "
                f"{self.prefix.lstrip('/')!r})"
            )
        if not 1 <= self.batch_size <= 10:
            raise DefinitionError(f"{what}: batch_size must be between 1 and 10")
        frozen_filter, frozen_schema = _check_common(what, self.filter, self.schema, self.partition_key_field)
        object.__setattr__(self, "filter", frozen_filter)
        object.__setattr__(self, "schema", frozen_schema)

    def __hash__(self) -> int:
        return hash(_hashable(self.to_json()))

    def __reduce__(self) -> tuple[Any, ...]:
        return _reduce_source(self)

    def covers(self, key: str) -> bool:
        """Whether an object key is under the watched prefix and ends with the watched suffix."""
        return key.startswith(self.prefix) and key.endswith(self.suffix)

    def event_pattern(self) -> dict[str, Any]:
        """The EventBridge pattern of this bucket's ``Object Created`` events under the prefix and suffix."""
        key: list[Any] = []
        if self.prefix and self.suffix:
            # One field's matchers are alternatives; both at once is a wildcard (escaped: keys may hold '*').
            key = [{"wildcard": f"{_escape_wildcard(self.prefix)}*{_escape_wildcard(self.suffix)}"}]
        elif self.prefix:
            key = [{"prefix": self.prefix}]
        elif self.suffix:
            key = [{"suffix": self.suffix}]
        detail: dict[str, Any] = {"bucket": {"name": [self.bucket]}}
        if key:
            detail["object"] = {"key": key}
        return {"source": ["aws.s3"], "detail-type": ["Object Created"], "detail": detail}

    def to_json(self) -> dict[str, Any]:
        """The catalog document's SOURCE shape."""
        return {
            "type": "s3",
            "bucket": self.bucket,
            "prefix": self.prefix,
            "suffix": self.suffix,
            "batch_size": self.batch_size,
            "filter": thaw_json(self.filter),
            "schema": thaw_json(self.schema),
            "partition_key_field": self.partition_key_field,
        }


@dataclass(frozen=True)
class EventBridgePattern:
    """Events on an EventBridge bus that match ``pattern``: each matching event becomes one asset event.

    ``pattern`` is an EventBridge event pattern on the whole event (``source``, ``detail-type``, ``detail``,
    ...), in the subset assetflow's filters check as well (values, ``prefix``, ``suffix``, ``exists``,
    ``numeric``, ``anything-but``). ``bus`` is ``"default"``, another bus's name or a bus ARN. The event's
    ``detail`` is the payload that ``filter``, ``schema`` and ``partition_key_field`` apply to; the extra holds
    ``detail-type``, ``source`` and ``detail``.

    Raises:
        DefinitionError: the pattern, bus or settings are invalid.

    """

    pattern: Mapping[str, Any]
    bus: str = "default"
    batch_size: int = 10
    filter: Mapping[str, Any] | None = None
    schema: Mapping[str, Any] | None = None
    partition_key_field: str | None = None

    def __post_init__(self) -> None:
        what = f"EventBridgePattern(bus={self.bus!r})"
        if not isinstance(self.bus, str) or not (
            _EVENT_BUS_ARN.match(self.bus) or (_EVENT_BUS.match(self.bus) and not self.bus.startswith("arn:"))
        ):
            raise DefinitionError(
                f"{what}: bus is 'default', an event bus name (letters, digits, '.', '_', '-', '/') or its ARN"
            )
        if not isinstance(self.pattern, Mapping) or not self.pattern:
            raise DefinitionError(
                f"{what}: pattern must be a non-empty EventBridge event pattern such as "
                "{'source': ['my.app'], 'detail-type': ['Order Placed']}"
            )
        validate_pattern(self.pattern, f"{what} pattern")
        if not 1 <= self.batch_size <= 10:
            raise DefinitionError(f"{what}: batch_size must be between 1 and 10")
        frozen_filter, frozen_schema = _check_common(what, self.filter, self.schema, self.partition_key_field)
        object.__setattr__(self, "pattern", freeze_json(dict(self.pattern), f"{what} pattern"))
        object.__setattr__(self, "filter", frozen_filter)
        object.__setattr__(self, "schema", frozen_schema)

    def __hash__(self) -> int:
        return hash(_hashable(self.to_json()))

    def __reduce__(self) -> tuple[Any, ...]:
        return _reduce_source(self)

    @property
    def bus_name(self) -> str:
        """The bus's name, from ``bus`` or from its ARN."""
        return self.bus.split(":event-bus/", 1)[1] if self.bus.startswith("arn:") else self.bus

    def event_pattern(self) -> dict[str, Any]:
        """The rule's event pattern."""
        return dict(thaw_json(self.pattern))

    def to_json(self) -> dict[str, Any]:
        """The catalog document's SOURCE shape."""
        return {
            "type": "eventbridge",
            "pattern": thaw_json(self.pattern),
            "bus": self.bus,
            "batch_size": self.batch_size,
            "filter": thaw_json(self.filter),
            "schema": thaw_json(self.schema),
            "partition_key_field": self.partition_key_field,
        }


@dataclass(frozen=True)
class KinesisStream:
    """A Kinesis data stream to watch: one the stack creates (a name) or an existing one (its ARN).

    Each record becomes one event (its data, decoded as JSON or text, is the payload); a failing batch is
    bisected and retried, then kept by the on-failure destination, as for Kafka topics. Filter, schema and
    partition key work as for :class:`SqsQueue`.

    Raises:
        DefinitionError: the stream name or settings are invalid.

    """

    stream: str
    starting_position: Literal["LATEST", "TRIM_HORIZON"] = "LATEST"
    batch_size: int = 100
    max_batching_window_seconds: int = 0
    filter: Mapping[str, Any] | None = None
    schema: Mapping[str, Any] | None = None
    partition_key_field: str | None = None

    def __post_init__(self) -> None:
        what = f"KinesisStream({self.stream!r})"
        if not isinstance(self.stream, str) or not (
            _STREAM_ARN.match(self.stream) or _STREAM_NAME.match(self.stream)
        ):
            raise DefinitionError(
                f"{what}: give a stream name (1-128 letters, digits, '.', '_', '-') or a stream ARN "
                "(arn:aws:kinesis:<region>:<account>:stream/<name>)"
            )
        if self.starting_position not in ("LATEST", "TRIM_HORIZON"):
            raise DefinitionError(f"{what}: starting_position is 'LATEST' or 'TRIM_HORIZON'")
        if not 1 <= self.batch_size <= 10_000:
            raise DefinitionError(f"{what}: batch_size must be between 1 and 10000")
        if not 0 <= self.max_batching_window_seconds <= 300:
            raise DefinitionError(f"{what}: max_batching_window_seconds must be between 0 and 300")
        frozen_filter, frozen_schema = _check_common(what, self.filter, self.schema, self.partition_key_field)
        object.__setattr__(self, "filter", frozen_filter)
        object.__setattr__(self, "schema", frozen_schema)

    def __hash__(self) -> int:
        return hash(_hashable(self.to_json()))

    def __reduce__(self) -> tuple[Any, ...]:
        return _reduce_source(self)

    @property
    def arn(self) -> str | None:
        """The ARN of an existing stream; None for a stream the stack creates."""
        return self.stream if self.stream.startswith("arn:") else None

    @property
    def stream_name(self) -> str:
        """The stream's name, from the name or the ARN."""
        return self.stream.rsplit("/", 1)[1] if self.stream.startswith("arn:") else self.stream

    def to_json(self) -> dict[str, Any]:
        """The catalog document's SOURCE shape."""
        return {
            "type": "kinesis",
            "stream": self.stream,
            "starting_position": self.starting_position,
            "batch_size": self.batch_size,
            "max_batching_window_seconds": self.max_batching_window_seconds,
            "filter": thaw_json(self.filter),
            "schema": thaw_json(self.schema),
            "partition_key_field": self.partition_key_field,
        }


WatcherSource = SqsQueue | KafkaTopic | S3ObjectCreated | EventBridgePattern | KinesisStream
#: The sources whose messages are EventBridge events, delivered to ingest through an SQS queue per watcher.
EventBridgeSource = S3ObjectCreated | EventBridgePattern


#: What ``MessageQueueTrigger`` passes on to the source it maps to.
_SQS_SETTINGS = frozenset(
    {"filter", "schema", "partition_key_field", "batch_size", "max_batching_window_seconds", "fifo"}
)
_KAFKA_SETTINGS = frozenset(
    {
        "filter",
        "schema",
        "partition_key_field",
        "batch_size",
        "consumer_group_id",
        "starting_position",
        "cluster",
    }
)
#: Airflow trigger arguments about connections and polling: event-source mappings replace both, so they are
#: accepted and have no effect.
_POLLING_ARGUMENTS = frozenset(
    {
        "aws_conn_id",
        "region_name",
        "verify",
        "botocore_config",
        "kafka_config_id",
        "poll_interval",
        "poll_timeout",
        "waiter_delay",
        "max_messages",
        "num_batches",
        "wait_time_seconds",
        "visibility_timeout",
        "delete_message_on_reception",
        "trigger_queue",
        "commit_offset",
    }
)
#: Airflow trigger arguments that would change which messages count: refused, with what to write instead.
_REFUSED_ARGUMENTS = {
    "apply_function": "a Python function per message cannot run in the ingest Lambda; use filter= (an "
    "EventBridge-style pattern on the payload) or a where() in the pipeline's schedule",
    "message_filtering": "use filter= (an EventBridge-style pattern on the payload)",
    "message_filtering_match_values": "use filter= (an EventBridge-style pattern on the payload)",
    "message_filtering_config": "use filter= (an EventBridge-style pattern on the payload)",
}
_SQS_URL = re.compile(
    r"^https://(?:sqs\.(?P<region>[a-z0-9-]+)|(?P<legacy>[a-z0-9-]+)\.queue)\.amazonaws\.com(?P<cn>\.cn)?"
    r"/(?P<account>\d{12})/(?P<queue>[A-Za-z0-9_-]{1,80}|[A-Za-z0-9_-]{1,75}\.fifo)/?$"
)
_KAFKA_URI = re.compile(r"^kafka://(?P<servers>[^/]+)/(?P<topics>[^/]+)$")
_SQS_NAME_URI = re.compile(r"^sqs://(?P<queue>[^/]+)$")


def _sqs_queue_from(text: str, settings: Mapping[str, Any]) -> SqsQueue:
    """An SQS queue from a queue URL, an ARN, or ``sqs://NAME`` (a queue the stack creates)."""
    url = _SQS_URL.match(text)
    if url:
        region = url["region"] or url["legacy"]
        partition = "aws-cn" if url["cn"] else "aws"
        return SqsQueue(arn=f"arn:{partition}:sqs:{region}:{url['account']}:{url['queue']}", **settings)
    if text.startswith("arn:"):
        return SqsQueue(arn=text, **settings)
    named = _SQS_NAME_URI.match(text)
    if named:
        return SqsQueue(name=named["queue"], **settings)
    raise DefinitionError(
        f"MessageQueueTrigger: {text!r} is not an SQS queue: give its URL "
        "(https://sqs.<region>.amazonaws.com/<account>/<queue>), its ARN, or sqs://<name> for a queue the stack "
        "creates (a local endpoint's URL does not say its region: use SqsQueue(name=...))"
    )


def _kafka_topic_from(topics: Any, settings: Mapping[str, Any], cluster: Any = None) -> KafkaTopic:
    names = (
        [topics] if isinstance(topics, str) else list(topics) if isinstance(topics, list | tuple) else None
    )
    if not names or not all(isinstance(t, str) for t in names):
        raise DefinitionError(
            f"MessageQueueTrigger: topics must be a topic name or a list of one, got {topics!r}"
        )
    if len(names) > 1:
        raise DefinitionError(
            f"MessageQueueTrigger: {len(names)} topics {names!r}: an assetflow watcher reads one topic; give each "
            "topic its own AssetWatcher (several may feed one asset's pipelines through an alias or |)"
        )
    return KafkaTopic(
        names[0],
        cluster=cluster if cluster is not None else settings.get("cluster"),
        **{k: v for k, v in settings.items() if k != "cluster"},
    )


class MessageQueueTrigger:
    """Airflow's ``MessageQueueTrigger``, mapped onto an assetflow source when it is built.

    Accepted shapes (Airflow 3.3's common-messaging provider, with the Amazon and Kafka providers):

    - ``MessageQueueTrigger(queue="https://sqs.<region>.amazonaws.com/<account>/<queue>")`` (or the queue's
      ARN, or ``sqs://<name>`` for a queue the stack creates) → :class:`SqsQueue`;
    - ``MessageQueueTrigger(scheme="sqs", sqs_queue=URL_OR_ARN)`` → :class:`SqsQueue`;
    - ``MessageQueueTrigger(queue="kafka://<host:port,...>/<topic>")`` → :class:`KafkaTopic` on that
      self-managed cluster;
    - ``MessageQueueTrigger(scheme="kafka", topics=["<topic>"])`` → :class:`KafkaTopic` on the environment's
      default cluster (or ``cluster=MskCluster(...)``).

    assetflow's source settings (``filter``, ``schema``, ``partition_key_field``, ``batch_size``, ...) pass
    through as keyword arguments. Airflow's connection and polling arguments (``aws_conn_id``,
    ``kafka_config_id``, ``poll_interval``, ...) have no effect: event-source mappings do the polling.

    Raises:
        DefinitionError: the queue cannot be mapped (another scheme, several topics, a function filter, an
            unknown argument); the message says what to write instead.

    """

    __slots__ = ("arguments", "source")

    source: WatcherSource
    arguments: Mapping[str, Any]

    def __init__(self, *, queue: str | None = None, scheme: str | None = None, **kwargs: Any) -> None:
        for name, fix in _REFUSED_ARGUMENTS.items():
            if name in kwargs:
                raise DefinitionError(f"MessageQueueTrigger: {name}= has no assetflow equivalent; {fix}")
        settings = {k: v for k, v in kwargs.items() if k not in _POLLING_ARGUMENTS}
        object.__setattr__(self, "arguments", MappingProxyType({"queue": queue, "scheme": scheme, **kwargs}))
        object.__setattr__(self, "source", self._map(queue, scheme, settings))

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"MessageQueueTrigger is immutable; cannot set {key!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageQueueTrigger):
            return NotImplemented
        return self.source == other.source

    def __hash__(self) -> int:
        return hash(self.source)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.arguments.items() if v is not None)
        return f"MessageQueueTrigger({shown})"

    @staticmethod
    def _check(settings: Mapping[str, Any], allowed: frozenset[str], kind: str) -> None:
        unknown = sorted(set(settings) - allowed)
        if unknown:
            raise DefinitionError(
                f"MessageQueueTrigger: {', '.join(unknown)} is not a setting of an assetflow {kind} source; "
                f"use {', '.join(sorted(allowed))}"
            )

    @classmethod
    def _map(cls, queue: str | None, scheme: str | None, settings: dict[str, Any]) -> WatcherSource:
        if queue is not None and not isinstance(queue, str):
            raise DefinitionError(f"MessageQueueTrigger: queue must be a string, not {type(queue).__name__}")
        if queue is not None and "://" not in queue and not queue.startswith("arn:") and scheme is not None:
            queue = None  # Airflow 3.3 routes a plain `queue=` beside `scheme=` to a triggerer queue
        if queue is not None:
            kafka = _KAFKA_URI.match(queue)
            if kafka:
                cls._check(settings, _KAFKA_SETTINGS - {"cluster"}, "Kafka")
                servers = tuple(s.strip() for s in kafka["servers"].split(","))
                return _kafka_topic_from(kafka["topics"].split(","), settings, SelfManagedKafka(servers))
            cls._check(settings, _SQS_SETTINGS, "SQS")
            return _sqs_queue_from(queue, settings)
        if scheme == "sqs":
            target = settings.pop("sqs_queue", None)
            if not isinstance(target, str):
                raise DefinitionError(
                    "MessageQueueTrigger(scheme='sqs') needs sqs_queue= (the queue's URL or ARN)"
                )
            cls._check(settings, _SQS_SETTINGS, "SQS")
            return _sqs_queue_from(target, settings)
        if scheme == "kafka":
            topics = settings.pop("topics", None)
            cls._check(settings, _KAFKA_SETTINGS, "Kafka")
            return _kafka_topic_from(topics, settings)
        if scheme is None:
            raise DefinitionError(
                "MessageQueueTrigger needs queue= (a queue URL or URI) or scheme= ('sqs' or 'kafka')"
            )
        raise DefinitionError(
            f"MessageQueueTrigger: scheme {scheme!r} is not supported; assetflow watches SQS queues (scheme='sqs') "
            "and Kafka topics (scheme='kafka')"
        )


@dataclass(frozen=True, init=False)
class AssetWatcher:
    """Watches one message source; every accepted message becomes one event of the asset it is attached to.

    ``AssetWatcher(name, SqsQueue(...))`` or, as in Airflow, ``AssetWatcher(name, trigger=MessageQueueTrigger(...))``.

    Raises:
        DefinitionError: the name, source or trigger is invalid.

    """

    name: str
    source: WatcherSource

    def __init__(
        self, name: str, source: WatcherSource | None = None, *, trigger: MessageQueueTrigger | None = None
    ) -> None:
        if not isinstance(name, str) or not _WATCHER_NAME.match(name):
            raise DefinitionError(
                f"AssetWatcher name {name!r}: 1-64 characters of letters, digits, '.', '_' or '-', "
                "starting with a letter or digit"
            )
        if trigger is not None:
            if source is not None:
                raise DefinitionError(f"AssetWatcher {name!r}: give a source or a trigger, not both")
            if not isinstance(trigger, MessageQueueTrigger):
                raise DefinitionError(
                    f"AssetWatcher {name!r}: trigger must be a MessageQueueTrigger(...), not {type(trigger).__name__}"
                )
            source = trigger.source
        if not isinstance(
            source, SqsQueue | KafkaTopic | S3ObjectCreated | EventBridgePattern | KinesisStream
        ):
            raise DefinitionError(
                f"AssetWatcher {name!r}: source must be SqsQueue(...), KafkaTopic(...), S3ObjectCreated(...), "
                "EventBridgePattern(...) or KinesisStream(...), "
                f"not {type(source).__name__}"
            )
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "source", source)

    def __reduce__(self) -> tuple[Any, ...]:
        return (AssetWatcher, (self.name, self.source))


def source_from_json(doc: Mapping[str, Any]) -> WatcherSource:
    """Rebuild a watcher source from its catalog document.

    Raises:
        DocumentError: the document is not a known source.

    """
    try:
        # What every kind of source has, under the same names in its document (an unknown kind: below).
        known = doc["type"] in ("sqs", "kafka", "s3", "eventbridge", "kinesis")
        common = (
            {k: doc[k] for k in ("batch_size", "filter", "schema", "partition_key_field")} if known else {}
        )
        if doc["type"] == "sqs":
            return SqsQueue(
                name=doc["queue"],
                arn=doc["queue_arn"],
                fifo=doc["fifo"],
                max_batching_window_seconds=doc["max_batching_window_seconds"],
                **common,
            )
        if doc["type"] == "kafka":
            cluster_doc = doc["cluster"]
            cluster: KafkaCluster | None = None
            if cluster_doc is not None:
                cluster = (
                    MskCluster(cluster_doc["cluster_arn"])
                    if cluster_doc["type"] == "msk"
                    else SelfManagedKafka(tuple(cluster_doc["bootstrap_servers"]))
                )
            return KafkaTopic(
                topic=doc["topic"],
                cluster=cluster,
                consumer_group_id=doc["consumer_group_id"],
                starting_position=doc["starting_position"],
                **common,
            )
        if doc["type"] == "s3":
            return S3ObjectCreated(bucket=doc["bucket"], prefix=doc["prefix"], suffix=doc["suffix"], **common)
        if doc["type"] == "eventbridge":
            return EventBridgePattern(pattern=doc["pattern"], bus=doc["bus"], **common)
        if doc["type"] == "kinesis":
            return KinesisStream(
                stream=doc["stream"],
                starting_position=doc["starting_position"],
                max_batching_window_seconds=doc["max_batching_window_seconds"],
                **common,
            )
    except (KeyError, TypeError, DefinitionError) as exc:
        raise DocumentError(f"invalid watcher source document: {exc}") from exc
    raise DocumentError(f"unknown watcher source type {doc.get('type')!r}")


def describe_source(source: WatcherSource) -> str:
    """A short label of a source for graphs and messages: ``SQS orders``, ``S3 landing/in/*.csv``, ..."""
    if isinstance(source, SqsQueue):
        return f"SQS {source.queue_name}"
    if isinstance(source, KafkaTopic):
        return f"Kafka {source.topic}"
    if isinstance(source, S3ObjectCreated):
        wildcard = "*" if source.prefix or source.suffix else ""
        return f"S3 {source.bucket}/{source.prefix}{wildcard}{source.suffix}"
    if isinstance(source, EventBridgePattern):
        return f"EventBridge {source.bus_name}"
    return f"Kinesis {source.stream_name}"
