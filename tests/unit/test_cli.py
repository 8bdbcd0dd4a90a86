"""The ``assetflow`` command line (DESIGN §5): validate, catalog, graph; run in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assetflow.core.graph import to_dot, to_mermaid
from assetflow.loader import load_catalog
from assetflow_dev import cli

PIPELINES = str(Path(__file__).resolve().parents[2] / "pipelines")
INVALID = str(Path(__file__).resolve().parent / "fixtures" / "invalid_catalog")
REFRESH_WARNING = (
    "warning: pipeline 'ops_dashboard': asset 'x-ops://dashboard/refresh' has no watcher and no producing pipeline; "
    "only the API or `assetflow events emit` can update it"
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- validate -----------------------------------------------------------------------------------


def test_validate_prints_a_summary(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "validate", "--pipelines", PIPELINES)
    assert code == 0
    assert out == "ok: 8 pipelines, 14 assets, 2 aliases, 5 watchers (1 warnings)\n"
    assert err == REFRESH_WARNING + "\n"


def test_validate_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", "--pipelines", PIPELINES, "--json")
    assert code == 0
    assert json.loads(out) == {
        "valid": True,
        "pipelines": 8,
        "assets": 14,
        "aliases": 2,
        "watchers": 5,
        "warnings": [REFRESH_WARNING],
    }


def test_validate_an_invalid_folder_lists_every_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "validate", "--pipelines", INVALID)
    assert code == 1
    assert out == ""
    assert err.startswith("assetflow validate: invalid catalog:\n")
    lines = [line for line in err.splitlines() if line.startswith("  - error: ")]
    assert len(lines) == 5
    for fragment in (
        "pipeline 'clean': declared twice",
        "asset 's3://fixture/orders': declared with two names, 'orders' and 'purchases'",
        "watcher 'refunds': watches the same sqs source as watcher 'orders'",
        "pipeline 'audit': uses alias 'never-produced'",
        "pipelines echo: their outlets satisfy their own schedules",
    ):
        assert sum(fragment in line for line in lines) == 1, fragment


def test_validate_a_file_that_fails_to_import(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "defs.py").write_text("from assetflow import Asset\nbad = Asset('airflow://x')\n")
    code, out, err = run(capsys, "validate", "--pipelines", str(tmp_path))
    assert code == 1
    assert out == ""
    assert err.startswith(f"assetflow validate: {tmp_path / 'defs.py'}: AssetUriError: ")


def test_validate_a_missing_folder(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "validate", "--pipelines", str(tmp_path / "missing"))
    assert code == 1
    assert out == ""
    assert err.startswith(f"assetflow validate: {tmp_path / 'missing'}: ")


def test_validate_a_missing_relative_folder(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "validate", "--pipelines", "./no-such-folder")
    assert code == 1
    assert "no-such-folder" in err


def test_pipelines_default_to_the_pipelines_folder(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(Path(PIPELINES).parent)
    code, out, _ = run(capsys, "validate")
    assert code == 0
    assert out.startswith("ok: 8 pipelines")


# --- catalog ------------------------------------------------------------------------------------


def test_catalog_json_is_the_document(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "catalog", "--json", "--pipelines", PIPELINES)
    assert code == 0
    assert json.loads(out) == load_catalog(PIPELINES).to_document()
    assert err == REFRESH_WARNING + "\n"


def test_catalog_json_to_a_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "catalog.json"
    code, out, _ = run(capsys, "catalog", "--json", "--pipelines", PIPELINES, "--output", str(target))
    assert code == 0
    assert out == ""
    assert json.loads(target.read_text()) == load_catalog(PIPELINES).to_document()


def test_catalog_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "catalog", "--pipelines", PIPELINES)
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 8
    assert "partner_feed_audit: alias:partner-exports -> spark_jobs/partner_feed_audit.py" in lines
    assert (
        "ops_dashboard: (s3://assetflow-demo/curated/deliveries & s3://assetflow-demo/iot/readings) | "
        "x-ops://dashboard/refresh -> spark_jobs/ops_dashboard.py"
    ) in lines


def test_catalog_of_an_invalid_folder(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "catalog", "--json", "--pipelines", INVALID)
    assert code == 1
    assert out == ""
    assert err.startswith("assetflow catalog: invalid catalog:")


# --- graph --------------------------------------------------------------------------------------


def test_graph_mermaid_is_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "graph", "--pipelines", PIPELINES)
    assert code == 0
    assert out == to_mermaid(load_catalog(PIPELINES))
    assert run(capsys, "graph", "--format", "mermaid", "--pipelines", PIPELINES)[1] == out


def test_graph_dot(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "graph", "--format", "dot", "--pipelines", PIPELINES)
    assert code == 0
    assert out == to_dot(load_catalog(PIPELINES))
    assert out.startswith("digraph assetflow {")

    target = tmp_path / "graph.dot"
    assert run(capsys, "graph", "--format", "dot", "-o", str(target), "--pipelines", PIPELINES)[:2] == (0, "")
    assert target.read_text() == out


def test_graph_png_needs_an_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "graph", "--format", "png", "--pipelines", PIPELINES)
    assert code == 2
    assert out == ""
    assert "assetflow graph: --format png writes a file: give --output graph.png" in err


def test_graph_png_without_graphviz(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(cli.shutil, "which", lambda name: None)
    code, _, err = run(
        capsys, "graph", "--format", "png", "-o", str(tmp_path / "g.png"), "--pipelines", PIPELINES
    )
    assert code == 1
    assert "needs Graphviz's `dot`" in err
    assert not (tmp_path / "g.png").exists()


# --- usage errors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["frobnicate"],
        [],
        ["graph", "--format", "svg"],
        ["validate", "--no-such-flag"],
        ["catalog", "--format", "dot"],
    ],
)
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    assert "usage: assetflow" in capsys.readouterr().err


def test_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for command in ("validate", "catalog", "graph"):
        assert command in out


def test_common_options_are_accepted_everywhere(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    args = cli.build_parser().parse_args(["graph", "--env", "dev", "--pipelines", PIPELINES])
    assert (args.endpoint_url, args.env, args.json, args.format) == (
        "http://127.0.0.1:1",
        "dev",
        False,
        "mermaid",
    )
    code, _, _ = run(
        capsys,
        "validate",
        "--endpoint-url",
        "http://localhost:4566",
        "--env",
        "dev",
        "--pipelines",
        PIPELINES,
    )
    assert code == 0


def test_validate_refuses_an_invalid_watcher_schema(tmp_path, capsys) -> None:
    (tmp_path / "bad.py").write_text(
        "from assetflow import Asset, AssetWatcher, Pipeline, SparkJob, SqsQueue\n"
        "a = Asset('x-t://a', watchers=[AssetWatcher('w', SqsQueue('q', schema={'type': 'no-such-type'}))])\n"
        "p = Pipeline('p', schedule=a, job=SparkJob('spark_jobs/p.py'))\n"
    )
    assert cli.main(["validate", "--pipelines", str(tmp_path)]) == 1
    assert "watcher 'w' schema" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("source", "words"),
    [
        (
            "S3ObjectCreated('s3://landing')",
            "S3ObjectCreated('s3://landing'): a bucket name has 3-63 characters",
        ),
        ("EventBridgePattern({'source': 'shop'})", "expected a list of allowed values"),
        (
            "KinesisStream('clicks', batch_size=0)",
            "KinesisStream('clicks'): batch_size must be between 1 and 10000",
        ),
        ("S3ObjectCreated('landing', schema={'type': 7})", "invalid JSON Schema"),
    ],
)
def test_validate_refuses_a_bad_source_saying_what_is_wrong(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, source: str, words: str
) -> None:
    (tmp_path / "defs.py").write_text(
        "from assetflow import Asset, AssetWatcher, EventBridgePattern, KinesisStream, S3ObjectCreated\n"
        f"a = Asset('x-a://a', watchers=[AssetWatcher('w', {source})])\n"
    )
    code, out, err = run(capsys, "validate", "--pipelines", str(tmp_path))
    assert code == 1
    assert out == ""
    assert words in err
