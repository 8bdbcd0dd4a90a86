"""The ``assetflow`` command: validate and compile definitions, draw the asset graph."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from assetflow.core.catalog import Catalog
from assetflow.core.errors import CatalogError
from assetflow.core.graph import condition_text, to_dot, to_mermaid
from assetflow.loader import LoadError, load_catalog

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


class CliError(Exception):
    """A failure to report on stderr with an exit code, without a traceback."""

    def __init__(self, message: str, code: int = EXIT_INVALID) -> None:
        super().__init__(message)
        self.code = code


def _catalog(args: argparse.Namespace) -> Catalog:
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
    """Check the definitions as a whole."""
    catalog = _catalog(args)
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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every command."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--pipelines",
        default="pipelines",
        help="definitions folder, .py file or module (default: pipelines/)",
    )
    common.add_argument(
        "--endpoint-url",
        default=os.environ.get("AWS_ENDPOINT_URL"),
        help="AWS endpoint (default: $AWS_ENDPOINT_URL)",
    )
    common.add_argument("--env", help="a deployed environment, read from its stack outputs")
    common.add_argument("--json", action="store_true", help="print JSON")

    parser = argparse.ArgumentParser(prog="assetflow", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {}

    def add(
        name: str, handler: Callable[[argparse.Namespace], int], help_text: str
    ) -> argparse.ArgumentParser:
        handlers[name] = handler
        sub = commands.add_parser(name, parents=[common], help=help_text, description=help_text)
        sub.set_defaults(handler=handler)
        return sub

    add("validate", cmd_validate, "check the definitions (URIs, unknown aliases, loops, watcher config)")
    catalog = add("catalog", cmd_catalog, "print the compiled definitions (--json: the versioned document)")
    catalog.add_argument("--output", "-o", help="write to this file instead of stdout")
    graph = add("graph", cmd_graph, "draw the asset graph: watchers -> assets -> pipelines -> outlets")
    graph.add_argument("--format", choices=("mermaid", "dot", "png"), default="mermaid")
    graph.add_argument("--output", "-o", help="write to this file (required for png)")
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
