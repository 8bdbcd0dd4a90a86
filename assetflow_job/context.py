"""The run context a job is started with, and ``run()``, which writes the outlet metadata on success."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any

from assetflow_job.contract import (
    CONTEXT_ARGUMENT,
    CONTEXT_FORMAT,
    DOCUMENT_VERSION,
    OUTLET_METADATA_FORMAT,
    OUTLETS_ARGUMENT,
)
from assetflow_job.errors import RunContextError
from assetflow_job.events import AssetEvent, parse_timestamp
from assetflow_job.extras import ExtraResolver, ResolvingEventReader
from assetflow_job.inlets import DynamoDbEventReader, EventReader, InletEventAccessors
from assetflow_job.outlets import OutletEventAccessors
from assetflow_job.refs import AliasRef, AssetRef, Metadata, asset_uri
from assetflow_job.storage import read_text, write_text

logger = logging.getLogger(__name__)

SUPPORTED_VERSION = DOCUMENT_VERSION


def split_context_argument(argv: Sequence[str]) -> tuple[str, list[str]]:
    """Take ``--assetflow-context URI`` (or ``--assetflow-context=URI``) out of ``argv``.

    Raises:
        RunContextError: when the argument is missing, repeated or has no value.

    """
    found: list[str] = []
    rest: list[str] = []
    items = list(argv)
    position = 0
    while position < len(items):
        item = items[position]
        if item == CONTEXT_ARGUMENT:
            if position + 1 >= len(items):
                raise RunContextError(
                    f"{CONTEXT_ARGUMENT} needs a value (an s3:// URI, a file:// URI or a path)"
                )
            found.append(items[position + 1])
            position += 2
            continue
        if item.startswith(CONTEXT_ARGUMENT + "="):
            found.append(item.split("=", 1)[1])
        else:
            rest.append(item)
        position += 1
    if not found or not found[0]:
        raise RunContextError(f"the job was started without {CONTEXT_ARGUMENT} URI")
    if len(found) > 1:
        raise RunContextError(f"{CONTEXT_ARGUMENT} was given {len(found)} times")
    return found[0], rest


def split_outlets_argument(argv: Sequence[str]) -> tuple[str | None, list[str]]:
    """Take ``--assetflow-outlets URI`` (or ``--assetflow-outlets=URI``) out of ``argv``, if it is there.

    Raises:
        RunContextError: when the argument is repeated or has no value.

    """
    found: list[str] = []
    rest: list[str] = []
    items = list(argv)
    position = 0
    while position < len(items):
        item = items[position]
        if item == OUTLETS_ARGUMENT:
            if position + 1 >= len(items) or not items[position + 1]:
                raise RunContextError(f"{OUTLETS_ARGUMENT} needs a value (an s3:// URI)")
            found.append(items[position + 1])
            position += 2
            continue
        if item.startswith(OUTLETS_ARGUMENT + "="):
            found.append(item.split("=", 1)[1])
        else:
            rest.append(item)
        position += 1
    if len(found) > 1:
        raise RunContextError(f"{OUTLETS_ARGUMENT} was given {len(found)} times")
    return (found[0] or None) if found else None, rest


def _declared(entries: Any, field: str) -> tuple[list[str], list[str]]:
    if entries is None:
        return [], []
    if not isinstance(entries, list):
        raise RunContextError(f"'{field}' must be a list")
    assets: list[str] = []
    aliases: list[str] = []
    for entry in entries:
        kind = entry.get("type") if isinstance(entry, Mapping) else None
        if kind == "asset" and isinstance(entry.get("uri"), str):
            assets.append(entry["uri"])
        elif kind == "alias" and isinstance(entry.get("name"), str):
            aliases.append(entry["name"])
        else:
            raise RunContextError(f"unrecognised entry in '{field}': {entry!r}")
    return assets, aliases


def _triggering_events(raw: Any, extras: ExtraResolver) -> dict[str, list[AssetEvent]]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise RunContextError("'triggering_asset_events' must map asset URIs to lists of events")
    events: dict[str, list[AssetEvent]] = {}
    for uri, items in raw.items():
        if not isinstance(items, list):
            raise RunContextError(f"triggering events of {uri!r} must be a list")
        try:
            parsed = [AssetEvent.from_dict(item, asset=uri) for item in items]
        except ValueError as exc:
            raise RunContextError(f"bad triggering event of {uri!r}: {exc}") from exc
        parsed = [extras.event(event) for event in parsed]
        events[uri] = sorted(parsed, key=lambda event: event.sort_key)
    return events


def _path_map(raw: Any) -> list[tuple[str, str]]:
    if raw is None:
        return []
    if not isinstance(raw, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise RunContextError("'path_map' must map URI prefixes to folders (strings)")
    # Longest prefix first, so s3://bucket/special/ wins over s3://bucket/.
    return sorted(((k, v) for k, v in raw.items() if k), key=lambda pair: len(pair[0]), reverse=True)


class RunContext:
    """What a running job knows: its run, the events that triggered it, its inlets and its outlets.

    Extras that ingest or the API stored by reference are resolved: each event's ``extra`` is the whole
    extra, read from S3 and checked against the reference's size and SHA-256 (``ExtraReferenceError``
    otherwise), when the context loads for triggering events and page by page for inlet events.

    Attributes:
        run_id: the run's id.
        pipeline: the pipeline's id.
        partition_key: the run's partition key, for partitioned pipelines (else None).
        conf: the run's configuration (a dict, Airflow's ``dag_run.conf``), or None.
        triggered_by: what started the run (``assets``, ``time``, ``manual``, ``replay``, ``backfill``).
        created_at: when the run was created (an aware UTC datetime), if the context says.
        args: the job's arguments, without ``--assetflow-context``.
        triggering_asset_events: asset URI -> its triggering events in (timestamp, id) order.
        inlet_events: lazy event history of each declared inlet asset.
        outlet_events: declared outlets, to set extra on or add alias events to.
        outlets: the declared outlets, as AssetRef and AliasRef.
        inlets: the declared inlets, as AssetRef and AliasRef.
        outlet_metadata_uri: where the outlet metadata goes when the run succeeds.
        context_uri: where the context was read from.

    """

    def __init__(
        self,
        document: Mapping[str, Any],
        *,
        args: Sequence[str] = (),
        context_uri: str | None = None,
        event_reader: EventReader | None = None,
        s3_client: Any = None,
    ) -> None:
        if not isinstance(document, Mapping):
            raise RunContextError("the run context must be a JSON object")
        if document.get("format") != CONTEXT_FORMAT:
            raise RunContextError(
                f"not a run context: format is {document.get('format')!r}, not {CONTEXT_FORMAT!r}"
            )
        if document.get("version") != SUPPORTED_VERSION:
            raise RunContextError(
                f"run context version {document.get('version')!r} is not supported (this helper reads 1)"
            )
        run_id, pipeline = document.get("run_id"), document.get("pipeline")
        if not isinstance(run_id, str) or not run_id or not isinstance(pipeline, str) or not pipeline:
            raise RunContextError("the run context needs string 'run_id' and 'pipeline'")
        metadata_uri = document.get("outlet_metadata_uri")
        if not isinstance(metadata_uri, str) or not metadata_uri:
            raise RunContextError("the run context needs an 'outlet_metadata_uri'")
        partition_key = document.get("partition_key")
        if partition_key is not None and not isinstance(partition_key, str):
            raise RunContextError("'partition_key' must be a string or null")
        created_at = document.get("created_at")
        try:
            self.created_at: datetime | None = parse_timestamp(created_at) if created_at else None
        except ValueError as exc:
            raise RunContextError(f"bad 'created_at': {exc}") from exc

        conf = document.get("conf")
        if conf is not None and not isinstance(conf, Mapping):
            raise RunContextError("'conf' must be a JSON object or null")
        triggered_by = document.get("triggered_by")
        self.run_id: str = run_id
        self.pipeline: str = pipeline
        #: The run's configuration (Airflow's ``dag_run.conf``): what ``runs trigger --conf`` gave, kept by
        #: replays; None otherwise.
        self.conf: dict[str, Any] | None = None if conf is None else dict(conf)
        #: What started the run: ``assets``, ``time``, ``manual``, ``replay`` or ``backfill`` (None from an
        #: older context).
        self.triggered_by: str | None = triggered_by if isinstance(triggered_by, str) else None
        #: The run a replay repeats, else None.
        self.replay_of: str | None = (
            document.get("replay_of") if isinstance(document.get("replay_of"), str) else None
        )
        self.partition_key: str | None = partition_key
        self.args: list[str] = list(args)
        self.context_uri = context_uri
        self.outlet_metadata_uri: str = metadata_uri
        self._extras = ExtraResolver(s3_client)
        self.triggering_asset_events = _triggering_events(
            document.get("triggering_asset_events"), self._extras
        )
        outlet_assets, outlet_aliases = _declared(document.get("outlets"), "outlets")
        inlet_assets, inlet_aliases = _declared(document.get("inlets"), "inlets")
        self.outlets = [AssetRef(u) for u in outlet_assets] + [AliasRef(n) for n in outlet_aliases]
        self.inlets = [AssetRef(u) for u in inlet_assets] + [AliasRef(n) for n in inlet_aliases]
        self.outlet_events = OutletEventAccessors(outlet_assets, outlet_aliases)
        self._events_table = document.get("events_table")
        self._event_reader = event_reader
        self.inlet_events = InletEventAccessors(inlet_assets, self._reader, inlet_aliases)
        self._path_map = _path_map(document.get("path_map"))

    def _reader(self) -> EventReader:
        reader = self._event_reader
        if reader is None:
            table = self._events_table
            if not isinstance(table, Mapping) or not table.get("name"):
                raise RunContextError(
                    "the run context names no 'events_table', so inlet_events cannot be read"
                )
            shards = table.get("shards")
            reader = DynamoDbEventReader(
                table["name"],
                region=table.get("region"),
                endpoint=table.get("endpoint_url"),
                shards=shards if isinstance(shards, Mapping) else None,
            )
        return ResolvingEventReader(reader, self._extras)

    def path(self, uri: object) -> str:
        """Return where the job reads or writes ``uri``: the context's ``path_map`` applied, else ``uri``.

        Locally the map sends ``s3://bucket/`` to a folder; on EMR there is none and S3 URIs pass through.
        """
        text = uri if isinstance(uri, str) else asset_uri(uri)
        for prefix, target in self._path_map:
            base = prefix.rstrip("/")
            if text == base or text.startswith(base + "/"):
                rest = text[len(base) :].lstrip("/")
                root = target.rstrip("/") or "/"
                if not rest:
                    return root
                return root + rest if root.endswith("/") else f"{root}/{rest}"
        return text

    def emit(self, metadata: Metadata) -> None:
        """Attach a Metadata, as yielding it from an Airflow task does.

        Raises:
            UndeclaredOutletError: when its asset (or alias) is not a declared outlet.

        """
        if not isinstance(metadata, Metadata):
            raise TypeError(f"emit() takes a Metadata, got {type(metadata).__name__}")
        self.outlet_events.emit(metadata)

    def outlet_metadata(self) -> dict[str, Any]:
        """Return the outlet metadata document the run writes when it succeeds."""
        return {
            "format": OUTLET_METADATA_FORMAT,
            "version": SUPPORTED_VERSION,
            "run_id": self.run_id,
            "events": self.outlet_events.events(),
        }

    def __repr__(self) -> str:
        return f"<RunContext pipeline={self.pipeline!r} run_id={self.run_id!r}>"


def load_context(
    context_uri: str,
    *,
    args: Sequence[str] = (),
    event_reader: EventReader | None = None,
    s3_client: Any = None,
) -> RunContext:
    """Read and parse the run context at ``context_uri`` (``s3://``, ``file://``, a path, or inline ``data:``).

    Raises:
        RunContextError: when it cannot be read or is not a version-1 run context.

    """
    try:
        text = read_text(context_uri, s3_client=s3_client)
    except FileNotFoundError as exc:
        raise RunContextError(f"no run context at {context_uri!r}") from exc
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise RunContextError(f"the run context at {context_uri!r} is not JSON: {exc}") from exc
    return RunContext(
        document, args=args, context_uri=context_uri, event_reader=event_reader, s3_client=s3_client
    )


class Run:
    """The ``with run() as ctx:`` block: a normal exit writes the outlet metadata, an exception nothing."""

    def __init__(
        self,
        argv: Sequence[str] | None = None,
        *,
        event_reader: EventReader | None = None,
        s3_client: Any = None,
    ) -> None:
        self._argv = list(sys.argv[1:] if argv is None else argv)
        self._event_reader = event_reader
        self._s3_client = s3_client
        self.context: RunContext | None = None

    def __enter__(self) -> RunContext:
        outlets_uri, argv = split_outlets_argument(self._argv)
        context_uri, rest = split_context_argument(argv)
        self.context = load_context(
            context_uri, args=rest, event_reader=self._event_reader, s3_client=self._s3_client
        )
        if outlets_uri is not None:
            # The run's own place, which only its arguments name (the context is readable by other runs).
            self.context.outlet_metadata_uri = outlets_uri
        logger.info(
            "run started pipeline=%s run_id=%s partition_key=%s triggering_assets=%d",
            self.context.pipeline,
            self.context.run_id,
            self.context.partition_key,
            len(self.context.triggering_asset_events),
        )
        return self.context

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        context = self.context
        if context is None:
            return
        if exc_type is not None:
            # A failed run updates no asset: leave no metadata behind for the run-state handler to emit.
            logger.error(
                "run failed, no outlet events pipeline=%s run_id=%s error=%s",
                context.pipeline,
                context.run_id,
                exc_type.__name__,
            )
            return
        document = context.outlet_metadata()
        plain = all(
            not event.get("extra")
            and not event.get("alias")
            and not event.get("aliases")
            and not event.get("version")
            and not event.get("checks")  # a check must reach the scheduler, even on an outlet without extra
            for event in document.get("events") or []
        )
        others = any(v for k, v in document.items() if k not in ("format", "version", "run_id", "events"))
        if plain and not others:
            # Nothing to say beyond "succeeded" (every declared outlet without an extra): no object, which saves
            # an S3 PUT per run; the run-state function emits the declared outlets without extras, as for a job
            # that wrote none.
            logger.info("no outlet metadata to write pipeline=%s run_id=%s", context.pipeline, context.run_id)
            return
        write_text(
            context.outlet_metadata_uri,
            json.dumps(document, indent=2, sort_keys=True),
            s3_client=self._s3_client,
        )
        logger.info(
            "outlet metadata written pipeline=%s run_id=%s uri=%s events=%d",
            context.pipeline,
            context.run_id,
            context.outlet_metadata_uri,
            len(document["events"]),
        )


def run(
    argv: Sequence[str] | None = None,
    *,
    event_reader: EventReader | None = None,
    s3_client: Any = None,
) -> Run:
    """Start a job's run; entering the block reads the context named by ``--assetflow-context``.

    ``argv`` defaults to ``sys.argv[1:]``; what remains after the context argument is ``ctx.args``.
    ``event_reader`` and ``s3_client`` replace the DynamoDB reader and the S3 client (tests).
    """
    return Run(argv, event_reader=event_reader, s3_client=s3_client)
