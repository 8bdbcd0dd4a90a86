"""SQS messages, Kafka and Kinesis records and EventBridge events (S3 objects) into asset events or quarantine."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from itertools import islice
from typing import Any, Literal

from jsonschema.exceptions import SchemaError, best_match
from jsonschema.protocols import Validator
from jsonschema.validators import Draft202012Validator, validator_for
from referencing.exceptions import Unresolvable

from assetflow.adapters.extras import S3ExtrasStore, summarise_facts
from assetflow.core.catalog import Catalog
from assetflow.core.errors import DefinitionError
from assetflow.core.events import AssetEvent, derive_id
from assetflow.core.filters import extract_field, matches
from assetflow.core.jsonvalue import thaw_json
from assetflow.core.limits import (
    MAX_MESSAGE_EXTRA_BYTES,
    MAX_PAYLOAD_DEPTH,
    MAX_QUARANTINE_BODY_BYTES,
    MAX_QUARANTINE_FACTS_BYTES,
    LimitError,
    check_partition_key,
    nesting_exceeds,
)
from assetflow.core.watchers import (
    AssetWatcher,
    EventBridgePattern,
    KafkaTopic,
    KinesisStream,
    MskCluster,
    S3ObjectCreated,
    SelfManagedKafka,
    SqsQueue,
)
from assetflow.ports import Accepted, ExtraTooLargeError, Outcome, Quarantined, ReasonCode

#: Validator messages quote the offending value, which may be large.
MAX_DETAIL_CHARS = 500
#: The watcher named in quarantine records of messages that no watcher claims; watcher names start with a
#: letter or digit, so this cannot be a watcher's name.
UNKNOWN_WATCHER = "(unknown)"
_MAX_SCHEMA_ERRORS = 20
# ASCII digits only: str.isdigit() also accepts "²", which int() refuses.
_INTEGER = re.compile(r"-?[0-9]{1,19}")


@dataclass(frozen=True)
class KafkaSource:
    """The cluster a Kafka Lambda event comes from (the fields next to its ``records``)."""

    event_source: str = ""
    event_source_arn: str | None = None
    bootstrap_servers: tuple[str, ...] = ()

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> KafkaSource:
        """Read the cluster fields of an MSK (``aws:kafka``) or self-managed Kafka Lambda event."""
        servers = event.get("bootstrapServers")
        return cls(
            event_source=str(event.get("eventSource") or ""),
            event_source_arn=str(event["eventSourceArn"]) if event.get("eventSourceArn") else None,
            bootstrap_servers=tuple(s for s in str(servers).split(",") if s) if servers else (),
        )

    @property
    def cluster_id(self) -> str:
        """The cluster in message identities: the MSK ARN, else the sorted bootstrap servers."""
        if self.event_source_arn:
            return self.event_source_arn
        if self.bootstrap_servers:
            return "bootstrap:" + ",".join(sorted(self.bootstrap_servers))
        return "unknown-cluster"


def build_validator(schema: Mapping[str, Any], what: str) -> Validator:
    """A validator for a watcher's JSON Schema: the draft its ``$schema`` names, Draft 2020-12 by default.

    Raises:
        DefinitionError: the schema is not a valid JSON Schema; the message names the watcher and the problem.

    """
    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise DefinitionError(
            f"{what}: invalid JSON Schema at {exc.json_path}: {_clip(exc.message)}"
        ) from exc
    return cls(schema)


def check_schemas(catalog: Catalog) -> dict[str, Validator]:
    """Build the validator of every watcher that has a schema.

    Raises:
        DefinitionError: a watcher's schema is invalid (the first one found, by watcher name).

    """
    validators: dict[str, Validator] = {}
    for name, (watcher, _uri) in catalog.watchers.items():
        if watcher.source.schema is not None:
            validators[name] = build_validator(thaw_json(watcher.source.schema), f"watcher {name!r} schema")
    return validators


class MessageTranslator:
    """Decides, for each message, the asset event it becomes or why it is quarantined; never raises for input.

    Built once per container: the watcher index and the JSON Schema validators are made here.

    ``watcher`` names the watcher this function serves, when it serves one: the stack deploys one ingest
    function per watcher, and the queues it creates have generated names, so a record the event source mapping
    delivers belongs to that watcher whatever its queue is called (an SQS record from a queue that another
    watcher names by ARN excepted). Without it (the local runtime), a record is matched by its queue's ARN
    (``SqsQueue(arn=...)``), its queue's name (``SqsQueue(name)``) or its topic and cluster.

    Raises:
        DefinitionError: a watcher's JSON Schema is invalid, or ``watcher`` is not a watcher of the catalog.

    """

    def __init__(self, catalog: Catalog, *, watcher: str | None = None) -> None:
        self._validators = check_schemas(catalog)
        self._assets_of = dict(catalog.watcher_assets)
        self._bound: tuple[AssetWatcher, str] | None = None
        if watcher is not None:
            if watcher not in catalog.watchers:
                raise DefinitionError(
                    f"this function serves watcher {watcher!r} (WATCHER_NAME), which the catalog does not have; "
                    "deploy the catalog and the functions together"
                )
            self._bound = catalog.watchers[watcher]
        self._sqs_by_arn: dict[str, tuple[AssetWatcher, str]] = {}
        self._sqs_by_name: dict[str, tuple[AssetWatcher, str]] = {}
        self._kafka_by_topic: dict[str, list[tuple[AssetWatcher, str]]] = {}
        self._kinesis_by_name: dict[str, tuple[AssetWatcher, str]] = {}
        for found, uri in catalog.watchers.values():
            source = found.source
            if isinstance(source, SqsQueue):
                if source.arn is not None:
                    self._sqs_by_arn[source.arn] = (found, uri)
                else:
                    self._sqs_by_name[source.queue_name] = (found, uri)
            elif isinstance(source, KafkaTopic):
                self._kafka_by_topic.setdefault(source.topic, []).append((found, uri))
            elif isinstance(source, KinesisStream):
                self._kinesis_by_name[source.stream_name] = (found, uri)

    # ---- SQS -----------------------------------------------------------------------------------------

    def from_sqs(
        self, record: Mapping[str, Any], *, now: datetime, extras: S3ExtrasStore | None = None
    ) -> Outcome:
        """Translate one record of an SQS Lambda event.

        The identity is ``sqs:<queue ARN>:<messageId>``: SQS redelivers a message with the same id. With
        ``extras``, an extra over its inline limit goes by reference (``Accepted.detached``).
        """
        arn = str(record.get("eventSourceARN") or "")
        queue = arn.rsplit(":", 1)[-1]
        body = record.get("body")
        text = body if isinstance(body, str) else ""
        message_id = record.get("messageId")
        if isinstance(message_id, str) and message_id:
            identity = f"sqs:{arn}:{message_id}"
        else:
            identity = f"sqs:{arn}:no-message-id:{_sha256(json.dumps(record, sort_keys=True, default=str))}"
        facts = {
            "queue": queue,
            "message_id": message_id,
            "attributes": _plain_mapping(record.get("attributes")),
            "message_attributes": _plain_mapping(record.get("messageAttributes")),
        }
        routed = self._bound_to(S3ObjectCreated) or self._bound_to(EventBridgePattern)
        if routed is not None and arn not in self._sqs_by_arn:
            # The watcher's own queue, which its EventBridge rule fills: the body is an EventBridge event.
            return self._from_eventbridge(routed, text, facts, identity, now=now, extras=extras)
        found = self._sqs_by_arn.get(arn) or self._bound_to(SqsQueue) or self._sqs_by_name.get(queue)
        if found is None:
            return _quarantine(
                UNKNOWN_WATCHER,
                "unknown-source",
                f"no watcher watches SQS queue {arn or '(no eventSourceARN)'}",
                facts,
                identity,
                text=text,
            )
        watcher, uri = found
        if not isinstance(message_id, str) or not message_id:
            return _quarantine(
                watcher.name,
                "malformed-record",
                "the SQS record has no messageId",
                facts,
                identity,
                text=text,
            )
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            # SQS bodies are Unicode text: a lone surrogate cannot come from SQS, nor be stored or sent on.
            return _quarantine(
                watcher.name,
                "not-utf8",
                f"the message body is not valid Unicode text (an unpaired surrogate at character {exc.start})",
                facts,
                identity,
                text=text,
            )
        sent = _sent_time(record, arn)
        outcome = self._judge(
            watcher, uri, "sqs", decode_payload(text), facts, identity, sent or now, text=text, extras=extras
        )
        if sent is None or not isinstance(outcome, Accepted):
            return outcome
        receives = _as_int(_plain_mapping(record.get("attributes")).get("ApproximateReceiveCount"))
        return replace(outcome, keyed=True, first_delivery=receives == 1)

    # ---- Kafka ---------------------------------------------------------------------------------------

    def from_kafka(
        self,
        record: Mapping[str, Any],
        *,
        source: KafkaSource,
        now: datetime,
        extras: S3ExtrasStore | None = None,
    ) -> Outcome:
        """Translate one record of an MSK or self-managed Kafka Lambda event.

        The identity is ``kafka:<cluster>:<topic>:<partition>:<offset>:<timestamp>``. The cluster keeps two
        clusters' topics apart; the record's timestamp (set once, by the producer or the broker) keeps a
        deleted and re-created topic, whose offsets start again at 0, from passing for redeliveries. A topic
        can be read again from any old offset (a consumer group reset, a replay), so the outcome's identity is
        lasting: its dedupe record is kept for good.
        """
        return replace(self._from_kafka(record, source=source, now=now, extras=extras), lasting_identity=True)

    def _from_kafka(
        self,
        record: Mapping[str, Any],
        *,
        source: KafkaSource,
        now: datetime,
        extras: S3ExtrasStore | None = None,
    ) -> Outcome:
        identity, facts = _kafka_identity(record, source)
        found = self._kafka_watcher(facts["topic"], source)
        watcher_name = found[0].name if found else UNKNOWN_WATCHER
        value: bytes | None = None
        try:
            value = _kafka_value(record)
            facts["key"] = _kafka_key(record, value)
            facts["headers"] = _decode_headers(record.get("headers"))
            watcher, uri = _kafka_claim(found, facts, source, value)
            text = None if value is None else _utf8(value)
        except _RefusedError as refusal:
            name = refusal.watcher or watcher_name
            return _quarantine(
                name, refusal.code, refusal.reason, facts, identity, text=refusal.text, raw=refusal.raw
            )
        if text is None:  # a tombstone (null value): there is no body, and null is the payload
            return self._judge(watcher, uri, "kafka", None, facts, identity, now, text="", extras=extras)
        return self._judge(
            watcher, uri, "kafka", decode_payload(text), facts, identity, now, text=text, extras=extras
        )

    def _bound_to(self, kind: type) -> tuple[AssetWatcher, str] | None:
        if self._bound is not None and isinstance(self._bound[0].source, kind):
            return self._bound
        return None

    def _kafka_watcher(self, topic: str, source: KafkaSource) -> tuple[AssetWatcher, str] | None:
        bound = self._bound_to(KafkaTopic)
        if bound is not None and bound[0].source.topic == topic:  # type: ignore[union-attr]
            return bound
        candidates = self._kafka_by_topic.get(topic, [])
        servers = set(source.bootstrap_servers)
        for watcher, uri in candidates:
            cluster = watcher.source.cluster  # type: ignore[union-attr]
            if isinstance(cluster, MskCluster) and cluster.cluster_arn == source.event_source_arn:
                return watcher, uri
            if isinstance(cluster, SelfManagedKafka) and servers & set(cluster.bootstrap_servers):
                return watcher, uri
        defaults = [c for c in candidates if c[0].source.cluster is None]  # type: ignore[union-attr]
        if defaults:
            return defaults[0]
        # The local runtime delivers every topic from its own broker: a topic watched on one cluster only is
        # that watcher's, whatever the event says about the cluster (the catalog forbids two watchers on
        # one topic of one cluster, so no second claimant can exist).
        if len(candidates) == 1:
            return candidates[0]
        return None

    # ---- EventBridge events (S3 objects, patterns), through the watcher's queue ----------------------

    def _from_eventbridge(
        self,
        bound: tuple[AssetWatcher, str],
        text: str,
        sqs_facts: Mapping[str, Any],
        sqs_identity: str,
        *,
        now: datetime,
        extras: S3ExtrasStore | None,
    ) -> Outcome:
        """An EventBridge event that the watcher's rule put on its queue: an S3 object or a matching event.

        The identity is the object version (``S3ObjectCreated``: its version id, else its ETag and sequencer)
        or the EventBridge event id, with the watcher's name: EventBridge delivers at least once, and a
        redelivery carries the same object and the same event id, never the same SQS message id.
        """
        watcher, uri = bound
        envelope = decode_payload(text)
        facts: dict[str, Any] = {"message": dict(sqs_facts)}
        if (
            not isinstance(envelope, Mapping)
            or not isinstance(envelope.get("detail"), Mapping)
            or not isinstance(envelope.get("id"), str)
            or not envelope.get("id")
        ):
            return _quarantine(
                watcher.name,
                "malformed-record",
                "the message is not an EventBridge event (a JSON object with an id and a detail object)",
                facts,
                sqs_identity,
                text=text,
            )
        event_facts = {
            name: envelope.get(name)
            for name in ("id", "time", "account", "region", "resources", "replay-name")
            if envelope.get(name) is not None
        }
        facts["event"] = event_facts
        source = watcher.source
        if isinstance(source, S3ObjectCreated):
            return self._from_s3_event(watcher, uri, source, envelope, facts, text, now=now, extras=extras)
        assert isinstance(source, EventBridgePattern)  # noqa: S101 - routed for these two kinds only
        identity = f"eventbridge:{watcher.name}:{envelope['id']}"
        if not matches(source.pattern, envelope):
            return _quarantine(
                watcher.name,
                "filter",
                "filtered out: the event does not match the watcher's EventBridge pattern on "
                + ", ".join(
                    repr(k) for k, rule in source.pattern.items() if not matches({k: rule}, envelope)
                ),
                facts,
                identity,
                text=text,
            )
        detail = thaw_json(envelope["detail"])
        extra = {
            "detail-type": envelope.get("detail-type"),
            "source": envelope.get("source"),
            "detail": detail,
            "event": event_facts,
            "message": facts["message"],
        }
        keep = {k: v for k, v in extra.items() if k not in ("detail", "message")}
        keep["message"] = summarise_facts(facts["message"])
        return self._judge(
            watcher,
            uri,
            "eventbridge",
            detail,
            facts,
            identity,
            now,
            text=text,
            extras=extras,
            extra=extra,
            keep=keep,
        )

    def _from_s3_event(
        self,
        watcher: AssetWatcher,
        uri: str,
        source: S3ObjectCreated,
        envelope: Mapping[str, Any],
        facts: dict[str, Any],
        text: str,
        *,
        now: datetime,
        extras: S3ExtrasStore | None,
    ) -> Outcome:
        detail = envelope["detail"]
        bucket = (
            (detail.get("bucket") or {}).get("name") if isinstance(detail.get("bucket"), Mapping) else None
        )
        obj = detail.get("object") if isinstance(detail.get("object"), Mapping) else {}
        # EventBridge events carry the key as it was written (S3's SQS, SNS and Lambda notifications URL-encode
        # it: "a b.csv" arrives as "a+b.csv" there), so it is used as it comes.
        key = obj.get("key")
        size = obj.get("size")
        # S3 spells it "etag"; moto's server "eTag".
        etag = obj.get("etag", obj.get("eTag"))
        version = obj.get("version-id")
        if version == "null":  # an object written while the bucket kept no versions (moto says so too)
            version = None
        sequencer = obj.get("sequencer")
        described = [bucket, key, version, None if version else etag, None if version else sequencer]
        identity = f"s3:{watcher.name}:{_sha256(json.dumps(described, default=str))}"
        if envelope.get("source") != "aws.s3" or envelope.get("detail-type") != "Object Created":
            return _quarantine(
                watcher.name,
                "filter",
                f"filtered out: not an S3 object creation (source {envelope.get('source')!r}, detail-type "
                f"{envelope.get('detail-type')!r})",
                facts,
                identity,
                text=text,
            )
        if (
            not isinstance(bucket, str)
            or not isinstance(key, str)
            or isinstance(size, bool)
            or not isinstance(size, int)
            or not isinstance(etag, str)
        ):
            return _quarantine(
                watcher.name,
                "malformed-record",
                "the S3 event lacks the bucket name, the object key, its size or its ETag",
                facts,
                identity,
                text=text,
            )
        if bucket != source.bucket or not source.covers(key):
            where = f"s3://{source.bucket}/{source.prefix}*{source.suffix}"
            return _quarantine(
                watcher.name,
                "filter",
                f"filtered out: object s3://{bucket}/{key} is not under the watched {where}",
                facts,
                identity,
                text=text,
            )
        described_object: dict[str, Any] = {"bucket": bucket, "key": key, "size": size, "etag": etag}
        if isinstance(version, str) and version:
            described_object["version_id"] = version
        extra = {
            **described_object,
            "sequencer": sequencer,
            "reason": detail.get("reason"),
            "event": facts["event"],
            "message": facts["message"],
        }
        return self._judge(
            watcher,
            uri,
            "s3",
            described_object,
            facts,
            identity,
            now,
            text=text,
            extras=extras,
            extra=extra,
            keep=extra,
            # The data version skip_unchanged pipelines compare: the object's version, else its content's ETag.
            version=version if isinstance(version, str) and version else etag,
        )

    # ---- Kinesis -------------------------------------------------------------------------------------

    def from_kinesis(
        self, record: Mapping[str, Any], *, now: datetime, extras: S3ExtrasStore | None = None
    ) -> Outcome:
        """Translate one record of a Kinesis Lambda event.

        The identity is ``kinesis:<watcher>:<stream ARN>:<shard>:<sequence number>``: a stream can be read
        again from any point of its retention (up to a year), so the identity is lasting, as for Kafka.
        """
        return replace(self._from_kinesis(record, now=now, extras=extras), lasting_identity=True)

    def _from_kinesis(
        self, record: Mapping[str, Any], *, now: datetime, extras: S3ExtrasStore | None
    ) -> Outcome:
        arn = str(record.get("eventSourceARN") or "")
        stream = arn.rsplit("/", 1)[-1]
        kinesis = _plain_mapping(record.get("kinesis"))
        sequence = kinesis.get("sequenceNumber")
        shard = str(record.get("eventID") or "").split(":", 1)[0]
        facts: dict[str, Any] = {
            "stream": stream,
            "shard_id": shard,
            "sequence_number": sequence,
            "partition_key": kinesis.get("partitionKey"),
            "approximate_arrival_timestamp": kinesis.get("approximateArrivalTimestamp"),
        }
        found = self._bound_to(KinesisStream) or self._kinesis_by_name.get(stream)
        if found is not None:
            watched = found[0].source
            if isinstance(watched, KinesisStream) and watched.arn is not None and arn and watched.arn != arn:
                found = None if self._bound is None else found
        name = found[0].name if found else UNKNOWN_WATCHER
        identity = f"kinesis:{name}:{arn}:{shard}:{sequence}"
        if not isinstance(sequence, str) or not sequence or not shard:
            identity += f":malformed:{_sha256(json.dumps(record, sort_keys=True, default=str))}"
        raw_data = kinesis.get("data")
        try:
            value = base64.b64decode(str(raw_data or ""), validate=True)
        except (binascii.Error, ValueError):
            return _quarantine(
                name,
                "not-base64",
                "the record's data is not base64 as Lambda delivers it",
                facts,
                identity,
                text=str(raw_data),
            )
        if found is None:
            return _quarantine(
                UNKNOWN_WATCHER,
                "unknown-source",
                f"no watcher watches Kinesis stream {arn or '(no eventSourceARN)'}",
                facts,
                identity,
                raw=value,
            )
        watcher, uri = found
        if not isinstance(sequence, str) or not sequence or not shard:
            return _quarantine(
                watcher.name,
                "malformed-record",
                "the Kinesis record has no sequence number or shard",
                facts,
                identity,
                raw=value,
            )
        try:
            text = _utf8(value)
        except _RefusedError as refusal:
            return _quarantine(watcher.name, refusal.code, refusal.reason, facts, identity, raw=refusal.raw)
        return self._judge(
            watcher, uri, "kinesis", decode_payload(text), facts, identity, now, text=text, extras=extras
        )

    # ---- the rules of a watcher ----------------------------------------------------------------------

    def _judge(
        self,
        watcher: AssetWatcher,
        uri: str,
        kind: Literal["sqs", "kafka", "s3", "eventbridge", "kinesis"],
        payload: Any,
        facts: dict[str, Any],
        identity: str,
        now: datetime,
        *,
        text: str,
        extras: S3ExtrasStore | None = None,
        extra: dict[str, Any] | None = None,
        keep: Mapping[str, Any] | None = None,
        version: str | None = None,
    ) -> Outcome:
        """The event a message becomes under its watcher's rules, or why it is quarantined.

        ``extra`` replaces the default ``{"payload", "message"}`` extra (EventBridge and S3 events name their
        parts); ``keep`` is what stays inline when the extra goes by reference; ``version`` is the event's data
        version (an S3 object's).
        """
        source = watcher.source

        def reject(code: ReasonCode, reason: str) -> Quarantined:
            return _quarantine(watcher.name, code, reason, facts, identity, text=text)

        if nesting_exceeds(payload, MAX_PAYLOAD_DEPTH):
            return reject("too-deep", f"the JSON payload nests deeper than {MAX_PAYLOAD_DEPTH} levels")
        if source.filter is not None and not matches(source.filter, payload):
            return reject("filter", _filter_reason(source.filter, payload))
        validator = self._validators.get(watcher.name)
        if validator is not None:
            try:
                errors = list(islice(validator.iter_errors(payload), _MAX_SCHEMA_ERRORS))
            except (Unresolvable, RecursionError) as exc:
                return reject(
                    "schema-unusable",
                    f"the watcher's JSON Schema cannot be applied ({type(exc).__name__}: {_clip(str(exc))}); "
                    "fix the schema and replay the message",
                )
            if errors:
                error = best_match(errors)
                more = len(errors) - 1
                also = (
                    "" if not more else f" (and {more}{'+' if more == _MAX_SCHEMA_ERRORS - 1 else ''} more)"
                )
                return reject(
                    "schema",
                    f"the payload does not match the watcher's JSON Schema at {error.json_path}: "
                    f"{_clip(error.message)}{also}",
                )
        partition_key = None
        if source.partition_key_field is not None:
            partition_key, problem = _partition_key(payload, source.partition_key_field)
            if problem is not None:
                return reject("partition-key", problem)
        if extra is None:
            extra = {"payload": payload, "message": facts}
            keep = {"message": summarise_facts(facts)}
        event_id = derive_id("ev", identity)
        detached = None
        if extras is None:
            # Measured as the store writes it (json.dumps' defaults escape non-ASCII), so bytes == characters.
            size = len(json.dumps(extra, sort_keys=True))
            if size > MAX_MESSAGE_EXTRA_BYTES:
                return reject(
                    "too-large",
                    f"payload too large for an event; its extra is {size} bytes of JSON, over the "
                    f"{MAX_MESSAGE_EXTRA_BYTES}-byte limit (no extras store is configured to keep it by reference). "
                    "Send a reference to the data (e.g. an s3:// URI) instead",
                )
        else:
            try:
                extra, detached = extras.place(event_id, extra, keep=dict(keep or {}))
            except ExtraTooLargeError as exc:
                return reject(
                    "too-large",
                    f"payload too large for an event; its extra is {exc.size} bytes of JSON, over the "
                    f"{exc.limit}-byte ceiling of extras stored by reference. "
                    "Send a reference to the data (e.g. an s3:// URI) instead",
                )
        event = AssetEvent(
            asset=uri,
            id=event_id,
            timestamp=now,
            extra=extra,
            source={"type": "watcher", "watcher": watcher.name, "kind": kind},
            partition_key=partition_key,
            version=version,
        )
        # One source feeding several assets: the same message is an event of each (ids differ by asset).
        others = tuple(
            replace(event, asset=other, id=derive_id("ev", identity, other))
            for other in self._assets_of.get(watcher.name, (uri,))
            if other != uri
        )
        return Accepted(event=event, identity=identity, watcher=watcher.name, detached=detached, also=others)


# ---- Kafka records ---------------------------------------------------------------------------------------


class _RefusedError(Exception):
    """A record quarantined before its watcher's rules apply, with its body as text or as raw bytes."""

    def __init__(
        self,
        code: ReasonCode,
        reason: str,
        *,
        watcher: str | None = None,
        text: str | None = None,
        raw: bytes | None = None,
    ) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.watcher = watcher
        self.text = text
        self.raw = raw


def _kafka_identity(record: Mapping[str, Any], source: KafkaSource) -> tuple[str, dict[str, Any]]:
    """A record's identity (its dedupe key) and its source facts, before its key and headers are decoded."""
    topic = str(record.get("topic") or "")
    partition = _as_int(record.get("partition"))
    offset = _as_int(record.get("offset"))
    timestamp = record.get("timestamp")
    stamp = "-" if timestamp is None else timestamp
    identity = f"kafka:{source.cluster_id}:{topic}:{partition}:{offset}:{stamp}"
    if partition is None or offset is None:
        # Malformed records must not share one identity, or all but the first would pass for redeliveries.
        identity += f":malformed:{_sha256(json.dumps(record, sort_keys=True, default=str))}"
    facts: dict[str, Any] = {
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "key": None,
        "headers": {},
        "timestamp": timestamp,
        "timestamp_type": record.get("timestampType"),
    }
    return identity, facts


def _kafka_value(record: Mapping[str, Any]) -> bytes | None:
    """The record's value, decoded from Lambda's base64 (None for a tombstone)."""
    raw_value = record.get("value")
    if raw_value is None:
        return None
    try:
        return base64.b64decode(str(raw_value), validate=True)
    except (binascii.Error, ValueError):
        raise _RefusedError(
            "not-base64", "the record's value is not base64 as Lambda delivers it", text=str(raw_value)
        ) from None


def _kafka_key(record: Mapping[str, Any], value: bytes | None) -> str | dict[str, str] | None:
    """The record's key, decoded from Lambda's base64."""
    try:
        return _decode_key(record.get("key"))
    except (binascii.Error, ValueError):
        raise _RefusedError(
            "not-base64", "the record's key is not base64 as Lambda delivers it", raw=value or b""
        ) from None


def _kafka_claim(
    found: tuple[AssetWatcher, str] | None, facts: Mapping[str, Any], source: KafkaSource, value: bytes | None
) -> tuple[AssetWatcher, str]:
    """The watcher (and its asset) that takes the record, when one does and the record is well formed."""
    if found is None:
        where = source.event_source_arn or ",".join(source.bootstrap_servers) or "an unnamed cluster"
        raise _RefusedError(
            "unknown-source",
            f"no watcher watches Kafka topic {facts['topic']!r} on {where}",
            watcher=UNKNOWN_WATCHER,
            raw=value or b"",
        )
    if facts["partition"] is None or facts["offset"] is None:
        raise _RefusedError(
            "malformed-record", "the Kafka record has no integer partition and offset", raw=value or b""
        )
    return found


def _utf8(value: bytes) -> str:
    """The record's value as text."""
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _RefusedError(
            "not-utf8",
            f"the record's value is not UTF-8 ({exc.reason} at byte {exc.start}); the body is kept as base64",
            raw=value,
        ) from None


# ---- decoding helpers ----------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is out of range")
    return number


def decode_payload(text: str) -> Any:
    """The payload of a message body: its JSON value if the text is JSON, else the text itself.

    JSON that cannot be stored faithfully (NaN, Infinity, numbers beyond a double's range) or that nests too
    deeply to parse is kept as text.
    """
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except (ValueError, RecursionError):
        return text


def _decode_bytes(raw: bytes) -> str | dict[str, str]:
    # Keys and headers are often text; binary ones (a Java long key, an Avro header) are kept as base64,
    # marked so that they cannot be mistaken for text.
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(raw).decode("ascii")}


def _decode_key(key: Any) -> str | dict[str, str] | None:
    if key is None:
        return None
    return _decode_bytes(base64.b64decode(str(key), validate=True))


def _header_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, list):
        # Java producers' bytes are signed: -1 is 0xFF.
        return bytes(int(b) & 0xFF for b in value if isinstance(b, int))
    text = str(value)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return text.encode("utf-8", "surrogatepass")


def _decode_headers(headers: Any) -> dict[str, Any]:
    """Headers as ``{name: value}``; a name that occurs more than once maps to the list of its values."""
    decoded: dict[str, Any] = {}
    repeated: set[str] = set()
    chunks: Iterable[Any] = headers if isinstance(headers, list) else []
    for chunk in chunks:
        if not isinstance(chunk, Mapping):
            continue
        for name, value in chunk.items():
            raw = _header_bytes(value)
            text = None if raw is None else _decode_bytes(raw)
            name = str(name)
            if name in repeated:
                decoded[name].append(text)
            elif name in decoded:
                decoded[name] = [decoded[name], text]
                repeated.add(name)
            else:
                decoded[name] = text
    return decoded


def _sent_time(record: Mapping[str, Any], arn: str) -> datetime | None:
    """When SQS took the message in (its ``SentTimestamp``): the time of the event a standard queue's message makes.

    SQS sets it, once, and every delivery of the message carries it, so the event's item (keyed by its time
    and its id from the message's identity) is the same on every delivery. A FIFO queue's messages keep the
    ingest time and their batch's order (two messages of a group can share a millisecond); a record without
    the attribute keeps the ingest time too, with a dedupe record.
    """
    if arn.endswith(".fifo"):
        return None
    attributes = record.get("attributes")
    sent = _as_int(attributes.get("SentTimestamp")) if isinstance(attributes, Mapping) else None
    if sent is None or sent <= 0:
        return None
    return datetime.fromtimestamp(sent / 1000, tz=UTC)


def _plain_mapping(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, v in value.items()}


def _as_int(value: Any) -> int | None:
    # Some Lambda samples spell the partition as a string ("0").
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _INTEGER.fullmatch(value):
        return int(value)
    return None


def _sha256(text: str | bytes) -> str:
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def _clip(text: str, limit: int = MAX_DETAIL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _filter_reason(pattern: Mapping[str, Any], payload: Any) -> str:
    if not isinstance(payload, Mapping):
        return f"filtered out: the watcher's filter needs a JSON object payload, got {_kind_of(payload)}"
    failing = [key for key, rule in pattern.items() if not matches({key: rule}, payload)]
    return "filtered out: the payload does not match the watcher's filter on " + ", ".join(
        repr(key) for key in failing
    )


def _partition_key(payload: Any, field: str) -> tuple[str | None, str | None]:
    """The partition key at ``field`` and None, or None and why there is no usable key."""
    value = extract_field(payload, field)
    where = f"the payload's {field!r} (the watcher's partition_key_field)"
    if value is None:
        return None, f"{where} is missing or null; a partition-aware consumer needs it"
    if isinstance(value, bool):
        key = "true" if value else "false"
    elif isinstance(value, int | float):
        key = json.dumps(value)
    elif isinstance(value, str):
        key = value
    else:
        return None, f"{where} is {_kind_of(value)}; a partition key must be a string or a number"
    try:
        return check_partition_key(key, what=where), None
    except LimitError as exc:
        return None, str(exc)


def _fit_facts(facts: Mapping[str, Any]) -> dict[str, Any]:
    fitted = dict(facts)
    if len(json.dumps(fitted, sort_keys=True, default=str)) <= MAX_QUARANTINE_FACTS_BYTES:
        return fitted
    # Keep the small facts (ids, offsets) that locate the message; replace the bulky ones by their size.
    for name, value in facts.items():
        size = len(json.dumps(value, sort_keys=True, default=str))
        if size > 1024:
            fitted[name] = {"omitted_bytes": size}
    return fitted


def _quarantine(
    watcher: str,
    code: ReasonCode,
    reason: str,
    facts: Mapping[str, Any],
    identity: str,
    *,
    text: str | None = None,
    raw: bytes | None = None,
) -> Quarantined:
    """A quarantine decision; the body is the text, or base64 of the raw bytes when they are not text."""
    if text is not None:
        data = text.encode("utf-8", "surrogatepass")
        encoding = "text"
    else:
        data = raw or b""
        encoding = "base64"
    body_facts = {"encoding": encoding, "bytes": len(data), "sha256": _sha256(data), "truncated": False}
    if encoding == "text":
        kept = data[:MAX_QUARANTINE_BODY_BYTES]
        # Cut on a character boundary; lone surrogates (impossible in real messages) become U+FFFD.
        body = kept.decode("utf-8", "ignore") if len(kept) < len(data) else data.decode("utf-8", "replace")
    else:
        kept = data[: MAX_QUARANTINE_BODY_BYTES // 4 * 3]
        body = base64.b64encode(kept).decode("ascii")
    if len(kept) < len(data):
        body_facts["truncated"] = True
        reason = (
            f"{reason} (the body kept here is cut to its first {len(kept)} of {len(data)} bytes; "
            "facts.body.sha256 identifies the whole message)"
        )
    return Quarantined(
        watcher=watcher,
        code=code,
        reason=reason,
        body=body,
        facts=_fit_facts({**facts, "body": body_facts}),
        identity=identity,
    )


__all__ = [
    "UNKNOWN_WATCHER",
    "Accepted",
    "KafkaSource",
    "MessageTranslator",
    "Outcome",
    "Quarantined",
    "build_validator",
    "check_schemas",
    "decode_payload",
]
