"""``assetflow replay-failures`` and ``assetflow reconcile-runs``: the operator's give-up commands.

Both work on the local runtime (``.assetflow/dev.json``: its invoke endpoint, failures bucket and queues) and,
with ``--env NAME``, on a deployed environment (the stack's outputs; the operator's AWS credentials): they hand
failures back to the functions, or run the sweep, through Lambda's Invoke API, so the deployed code and catalog
do the work with the functions' own permissions. docs/runbook-failures.md says when to use which.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
from dataclasses import dataclass
from typing import Any

from assetflow_dev.replay import FailureReplayer, FailureSources, ReplayReport, lambda_invoker

EXIT_OK, EXIT_FAILURES_LEFT = 0, 1


@dataclass(frozen=True)
class _Environment:
    """Clients and names of the environment the command works on."""

    sources: FailureSources
    lambda_client: Any
    s3: Any
    sqs: Any
    streams: Any
    where: str


def _queue_arn(url: str) -> str:
    """``https://sqs.<region>.amazonaws.com/<account>/<name>`` as ``arn:aws:sqs:<region>:<account>:<name>``."""
    parts = urllib.parse.urlsplit(url)
    account, name = parts.path.strip("/").split("/")[-2:]
    host = parts.hostname or ""
    region = host.split(".")[1] if host.startswith("sqs.") else "us-east-1"
    return f"arn:aws:sqs:{region}:{account}:{name}"


def _local(args: argparse.Namespace) -> _Environment:
    import boto3

    from assetflow.adapters.clients import aws_client
    from assetflow_dev import LOCAL_REGION, client
    from assetflow_dev.cli import DEV_CONFIG, CliError, _dev_config

    dev = _dev_config()
    if dev is None:
        raise CliError(
            f"no {DEV_CONFIG} here: run `assetflow dev up` in this directory, or give --env NAME for a deployed "
            "environment"
        )
    endpoints = dev.get("endpoints") or {}
    if not endpoints.get("lambda"):
        raise CliError(f"{DEV_CONFIG} has no invoke endpoint (endpoints.lambda): restart `assetflow dev up`")
    failures = dev.get("failures") or {}
    functions = {role: str(name) for role, name in (dev.get("functions") or {}).items()}
    queues = dev.get("queues") or {}
    sources = FailureSources(
        functions=functions,
        failures_bucket=failures.get("bucket") or None,
        failure_queues=dict(failures.get("queues") or {}),
        dead_letter_queues={w: (q["dlq_url"], q["arn"]) for w, q in queues.items() if q.get("dlq_url")},
    )
    # The invoke endpoint takes the runtime's token as the access key id (dev.json is its owner's alone).
    session = boto3.session.Session(
        aws_access_key_id=str((dev.get("api") or {}).get("token") or ""),
        aws_secret_access_key="local",  # noqa: S106 - the local endpoint checks the key id only
        region_name=LOCAL_REGION,
    )
    return _Environment(
        sources=sources,
        lambda_client=aws_client("lambda", session=session, endpoint=endpoints["lambda"]),
        s3=client("s3", endpoints["s3"]),
        sqs=client("sqs", endpoints["sqs"]),
        streams=client("dynamodbstreams", endpoints["dynamodb"]),
        where=f"the local runtime ({DEV_CONFIG})",
    )


def _deployed(args: argparse.Namespace) -> _Environment:
    from assetflow.adapters.stack_outputs import StackOutputsError, read_stack_outputs
    from assetflow_dev.cli import CliError, _client, _endpoint_for

    cloudformation = _client(
        "cloudformation", _endpoint_for(args, "AWS_ENDPOINT_URL_CLOUDFORMATION"), local=False
    )
    try:
        outputs = read_stack_outputs(cloudformation, args.env)
    except StackOutputsError as exc:
        raise CliError(f"--env {args.env}: {exc}") from exc
    found = outputs.outputs
    if "FunctionNames" not in found:
        raise CliError(
            f"stack {outputs.stack_name} has no FunctionNames output: deploy this version of assetflow first"
        )
    watched = json.loads(found.get("QueueUrls") or "{}")
    dead_letters = json.loads(found.get("DeadLetterQueueUrls") or "{}")
    sources = FailureSources(
        functions=json.loads(found["FunctionNames"]),
        failures_bucket=found.get("FailuresBucket"),
        failure_queues=json.loads(found.get("FailureQueueUrls") or "{}"),
        dead_letter_queues={
            w: (url, _queue_arn(watched[w])) for w, url in dead_letters.items() if w in watched
        },
    )

    def aws(service: str, variable: str) -> Any:
        return _client(service, _endpoint_for(args, variable), local=False)

    return _Environment(
        sources=sources,
        lambda_client=aws("lambda", "AWS_ENDPOINT_URL_LAMBDA"),
        s3=aws("s3", "AWS_ENDPOINT_URL_S3"),
        sqs=aws("sqs", "AWS_ENDPOINT_URL_SQS"),
        streams=aws("dynamodbstreams", "AWS_ENDPOINT_URL_DYNAMODB_STREAMS"),
        where=f"stack {outputs.stack_name}",
    )


def _environment(args: argparse.Namespace) -> _Environment:
    return _deployed(args) if args.env else _local(args)


def cmd_replay_failures(args: argparse.Namespace) -> int:
    """Hand every kept failure back to its function; delete it once it went through."""
    from assetflow_dev.cli import _view_errors

    with _view_errors(args):
        env = _environment(args)
        replayer = FailureReplayer(
            sources=env.sources,
            invoke=lambda_invoker(env.lambda_client),
            s3=env.s3,
            sqs=env.sqs,
            streams=env.streams,
            dry_run=args.dry_run,
        )
        report = replayer.replay()
    if args.json:
        print(json.dumps(report.to_json(), indent=2, sort_keys=True))
    else:
        _print_replay(report, env.where)
    return EXIT_FAILURES_LEFT if report.count("failed") else EXIT_OK


def _print_replay(report: ReplayReport, where: str) -> None:
    for item in report.items:
        detail = f"  ({item.detail})" if item.detail else ""
        print(f"{item.outcome:9} {item.source}  {item.item}  -> {item.function or '-'}{detail}")
    summary = report.to_json()
    done = (
        f"would replay {summary['found'] - summary['skipped']}"
        if report.dry_run
        else f"replayed {summary['replayed']}"
    )
    print(
        f"{where}: {summary['found']} failure(s); {done}, still failing {summary['failed']}, "
        f"skipped {summary['skipped']}"
        + (" (dry run: nothing invoked or deleted)" if report.dry_run else ""),
        file=sys.stderr,
    )


def cmd_reconcile_runs(args: argparse.Namespace) -> int:
    """Run the reconciliation sweep now and print what it repaired (or would, with --dry-run)."""
    from assetflow_dev.cli import CliError, _view_errors

    with _view_errors(args):
        env = _environment(args)
        function = env.sources.functions.get("reconcile")
        if function is None:
            raise CliError(f"{env.where} has no reconcile function")
        response, error = lambda_invoker(env.lambda_client)(function, {"dry_run": bool(args.dry_run)})
    if error is not None:
        raise CliError(f"the sweep failed: {error.get('errorType')}: {error.get('errorMessage')}")
    if args.json:
        print(json.dumps(response, indent=2, sort_keys=True))
        return EXIT_OK
    for what, runs in sorted((response.get("runs") or {}).items()):
        for run in runs:
            print(f"{what:16} {run}")
    keys = ("checked", "finished", "started", "resubmitted", "failed_refused", "released", "unknown_job_runs")
    counts = ", ".join(f"{k.replace('_', ' ')} {response.get(k, 0)}" for k in keys)
    print(
        f"{env.where}: repaired {response.get('repaired', 0)} ({counts})"
        + (" (dry run: nothing changed)" if args.dry_run else ""),
        file=sys.stderr,
    )
    for error_line in response.get("errors") or []:
        print(f"error: {error_line}", file=sys.stderr)
    return EXIT_FAILURES_LEFT if response.get("errors") else EXIT_OK


def cmd_reconcile(args: argparse.Namespace) -> int:
    """Compare each source's watermark with what was recorded and replay the gaps (or list them, --dry-run)."""
    from assetflow.usecases.sources import SourceReconciler, UnknownSourceError
    from assetflow_dev.cli import CliError, _store, _view_catalog, _view_errors

    with _view_errors(args):
        env = _environment(args)
        catalog = _view_catalog(args)
        store = _store(args)
        probes, skipped = _probes(args, env, catalog, events=store)
        reconciler = SourceReconciler(watermarks=store, probes=probes)
        try:
            report = reconciler.reconcile(source=args.source, dry_run=bool(args.dry_run))
        except UnknownSourceError as exc:
            raise CliError(str(exc)) from exc
    doc = report.to_json()
    doc["skipped"] = skipped
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=True))
        return EXIT_FAILURES_LEFT if report.errors else EXIT_OK
    for source in report.sources:
        for finding in source.findings:
            print(
                f"{source.watcher:20} {finding['kind']:13} {finding['what']}  ({finding['count']} message(s))"
            )
    for line in skipped:
        print(f"skipped: {line}", file=sys.stderr)
    for line in report.errors:
        print(f"error: {line}", file=sys.stderr)
    done = "would replay them" if report.dry_run else f"replayed {report.replayed}"
    print(
        f"{env.where}: {len(report.sources)} source(s); {report.found} message(s) missing, {done}"
        + (" (dry run: nothing replayed)" if report.dry_run else ""),
        file=sys.stderr,
    )
    return EXIT_FAILURES_LEFT if report.errors else EXIT_OK


def _probes(
    args: argparse.Namespace, env: _Environment, catalog: Any, *, events: Any = None
) -> tuple[list[Any], list[str]]:
    """One probe per watcher this environment can reach; what it cannot reach, said.

    An S3 watcher gets two: its queue's dead letters first (the real events, replayed as they came), then its
    prefix listed against ``events`` (the event store), which finds what is still missing.
    """
    from assetflow.core.watchers import KafkaTopic, S3ObjectCreated
    from assetflow_dev.cli import _dev_config
    from assetflow_dev.sources import KafkaProbe, S3PrefixProbe, SqsDeadLetterProbe

    invoke = lambda_invoker(env.lambda_client)
    dev = None if args.env else (_dev_config() or {})
    probes: list[Any] = []
    skipped: list[str] = []
    for name, (watcher, uri) in sorted(catalog.watchers.items()):
        function = env.sources.functions.get(f"ingest-{name}")
        if function is None:
            skipped.append(f"{name}: no ingest function in {env.where}")
            continue
        if isinstance(watcher.source, KafkaTopic):
            topic = ((dev or {}).get("topics") or {}).get(name)
            servers = ((dev or {}).get("endpoints") or {}).get("kafka")
            if not topic or not servers:
                skipped.append(f"{name}: the Kafka brokers are reachable from the local runtime only")
                continue
            probes.append(
                KafkaProbe(
                    watcher=name,
                    topic=topic["topic"],
                    group_id=topic["group_id"],
                    bootstrap_servers=servers,
                    function=function,
                    invoke=invoke,
                    event_source=topic.get("event_source") or "aws:kafka",
                    event_source_arn=topic.get("event_source_arn"),
                )
            )
        elif name in env.sources.dead_letter_queues:
            url, arn = env.sources.dead_letter_queues[name]
            probes.append(
                SqsDeadLetterProbe(
                    watcher=name,
                    queue_arn=arn,
                    dead_letter_url=url,
                    function=function,
                    invoke=invoke,
                    sqs=env.sqs,
                )
            )
            if isinstance(watcher.source, S3ObjectCreated) and events is not None:
                # A listing works from anywhere the operator's credentials reach the bucket.
                probes.append(
                    S3PrefixProbe(
                        watcher=name,
                        asset=uri,
                        source=watcher.source,
                        s3=env.s3,
                        events=events,
                        function=function,
                        invoke=invoke,
                        queue_arn=arn,
                    )
                )
        else:
            skipped.append(f"{name}: no probe for this source kind yet")
    return probes, skipped


__all__ = ["cmd_reconcile", "cmd_reconcile_runs", "cmd_replay_failures"]
