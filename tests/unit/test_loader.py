"""Loading definitions from a folder of Python files, one file, or a dotted module."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from assetflow import Asset, CatalogError, DefinitionError, Pipeline
from assetflow.loader import LoadError, load_catalog, load_definitions

PIPELINES = Path(__file__).resolve().parents[2] / "pipelines"
INVALID = Path(__file__).resolve().parent / "fixtures" / "invalid_catalog"

HEADER = "from assetflow import Asset, AssetAlias, Pipeline, SparkJob\n"


def write(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(HEADER + textwrap.dedent(body))
    return path


@pytest.fixture
def linked(tmp_path: Path) -> Path:
    """A folder whose files import each other by bare module name, one of them before its own turn."""
    folder = tmp_path / "linked"
    write(
        folder,
        "a_reports.py",
        """
        from z_base import cleaned

        report = Asset("report", "s3://linked/report")
        reports = Pipeline("reports", cleaned, SparkJob("jobs/report.py"), outlets=[report])
        """,
    )
    write(
        folder,
        "z_base.py",
        """
        raw = Asset("raw", "s3://linked/raw")
        cleaned = Asset("cleaned", "s3://linked/cleaned")
        clean = Pipeline("clean", raw, SparkJob("jobs/clean.py"), outlets=[cleaned])
        """,
    )
    return folder


@pytest.fixture
def forget_modules() -> Iterator[list[str]]:
    """Names of modules a test imports through sys.path; removed afterwards."""
    names: list[str] = []
    yield names
    for name in list(sys.modules):
        if any(name == n or name.startswith(n + ".") for n in names):
            del sys.modules[name]


# --- folders ------------------------------------------------------------------------------------


def test_files_import_each_other_by_bare_module_name(linked: Path) -> None:
    definitions = load_definitions(linked)

    by_value = {getattr(d.value, "id", None) or d.value.uri: d.origin for d in definitions}  # type: ignore[attr-defined]
    assert by_value == {
        "s3://linked/report": f"{linked}/a_reports.py",
        "reports": f"{linked}/a_reports.py",
        "s3://linked/cleaned": f"{linked}/a_reports.py",
        "s3://linked/raw": f"{linked}/z_base.py",
        "clean": f"{linked}/z_base.py",
    }
    # z_base was imported once: its objects are the ones a_reports uses
    cleaned = next(
        d.value for d in definitions if isinstance(d.value, Asset) and d.value.uri == "s3://linked/cleaned"
    )
    reports = next(d.value for d in definitions if isinstance(d.value, Pipeline) and d.value.id == "reports")
    assert next(reports.condition.iter_assets()) is cleaned


def test_a_linked_folder_builds_a_catalog(linked: Path) -> None:
    catalog = load_catalog(linked)
    assert sorted(catalog.pipelines) == ["clean", "reports"]
    assert catalog.assets["s3://linked/cleaned"].name == "cleaned"


def test_the_example_folder_loads() -> None:
    definitions = load_definitions(PIPELINES)
    pipelines = sorted(d.value.id for d in definitions if isinstance(d.value, Pipeline))
    assert pipelines == [
        "daily_report",
        "deliveries_etl",
        "inbox_digest",
        "ops_dashboard",
        "partner_exports",
        "partner_feed_audit",
        "sensor_check",
        "sensor_daily_rollup",
    ]
    origins = {d.origin.rsplit("/", 1)[1] for d in definitions}
    assert origins == {"deliveries.py", "inbox.py", "reports.py", "sensors.py"}


def test_loading_the_same_folder_twice_works_and_cleans_up(linked: Path) -> None:
    first = load_catalog(linked).to_document()
    assert "z_base" not in sys.modules
    assert "a_reports" not in sys.modules
    assert str(linked) not in sys.path

    assert load_catalog(linked).to_document() == first
    assert load_catalog(PIPELINES).to_document() == load_catalog(PIPELINES).to_document()
    assert not {"deliveries", "sensors", "reports"} & set(sys.modules)


def test_two_folders_may_reuse_module_names(tmp_path: Path) -> None:
    write(tmp_path / "one", "defs.py", 'p = Pipeline("one", Asset("s3://x/1"), SparkJob("j.py"))\n')
    write(tmp_path / "two", "defs.py", 'p = Pipeline("two", Asset("s3://x/2"), SparkJob("j.py"))\n')
    assert list(load_catalog(tmp_path / "one").pipelines) == ["one"]
    assert list(load_catalog(tmp_path / "two").pipelines) == ["two"]


def test_files_starting_with_underscore_are_helpers(tmp_path: Path) -> None:
    write(tmp_path, "_broken.py", 'raise RuntimeError("must not be loaded on its own")\n')
    write(tmp_path, "_shared.py", 'shared = Asset("shared", "s3://x/shared")\n')
    write(tmp_path, "defs.py", 'from _shared import shared\np = Pipeline("p", shared, SparkJob("j.py"))\n')

    definitions = load_definitions(tmp_path)

    assert sorted(d.origin.rsplit("/", 1)[1] for d in definitions) == ["defs.py", "defs.py"]
    assert "_shared" not in sys.modules


def test_only_module_level_pipelines_and_assets_are_collected(tmp_path: Path) -> None:
    write(
        tmp_path,
        "defs.py",
        """
        alias = AssetAlias("a")
        job = SparkJob("j.py")
        numbers = [Asset("s3://x/in-a-list")]
        asset = Asset("s3://x/a")
        same = asset
        """,
    )
    assert [d.value for d in load_definitions(tmp_path)] == [Asset("s3://x/a")]


def test_a_single_file(tmp_path: Path) -> None:
    path = write(tmp_path, "one.py", 'p = Pipeline("p", Asset("s3://x/a"), SparkJob("j.py"))\n')
    definitions = load_definitions(path)
    assert [d.origin for d in definitions] == [str(path)]
    assert "one" not in sys.modules


# --- failures -----------------------------------------------------------------------------------


def test_a_definition_error_names_the_file_and_line(tmp_path: Path) -> None:
    write(tmp_path, "good.py", 'ok = Asset("s3://x/ok")\n')
    bad = write(
        tmp_path, "bad.py", '\n\nbroken = Pipeline("1-bad-id", Asset("s3://x/a"), SparkJob("j.py"))\n'
    )

    with pytest.raises(LoadError) as info:
        load_definitions(tmp_path)

    message = str(info.value)
    assert message.startswith(f"{bad}: DefinitionError: Pipeline id '1-bad-id'")
    assert f'File "{bad}", line 4' in message
    assert isinstance(info.value.__cause__, DefinitionError)
    assert "bad" not in sys.modules
    assert str(tmp_path) not in sys.path


def test_an_import_error_and_a_syntax_error_are_load_errors(tmp_path: Path) -> None:
    write(tmp_path / "a", "defs.py", "import no_such_module_anywhere\n")
    write(tmp_path / "b", "defs.py", "def broken(:\n")
    with pytest.raises(
        LoadError, match=r"defs\.py: ModuleNotFoundError: No module named 'no_such_module_anywhere'"
    ):
        load_definitions(tmp_path / "a")
    with pytest.raises(LoadError, match=r"defs\.py: SyntaxError"):
        load_definitions(tmp_path / "b")


def test_an_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not python")
    write(tmp_path, "_helper.py", "")
    with pytest.raises(LoadError, match=r"no definition files \(\*\.py\) found"):
        load_definitions(tmp_path)


def test_a_missing_path(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match=r"/missing: "):
        load_definitions(tmp_path / "missing")
    with pytest.raises(LoadError, match=r"missing\.py: no such file"):
        load_definitions(tmp_path / "missing.py")
    with pytest.raises(
        LoadError, match=r"^no_such_package_anywhere\.defs: not a folder, a \.py file or an importable"
    ):
        load_definitions("no_such_package_anywhere.defs")


@pytest.mark.parametrize("target", ["./missing", "../missing"])
def test_a_missing_relative_path(target: str) -> None:
    with pytest.raises(LoadError):
        load_definitions(target)


def test_invalid_definitions_fail_as_a_whole() -> None:
    with pytest.raises(CatalogError) as info:
        load_catalog(INVALID)
    assert len(info.value.diagnostics) == 5
    assert any("invalid_orders.py and" in d and "invalid_reports.py" in d for d in info.value.diagnostics)


def test_a_file_named_like_a_loaded_module_leaves_that_module_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = ModuleType("assetflow_test_shadowed")
    monkeypatch.setitem(sys.modules, "assetflow_test_shadowed", original)
    write(tmp_path, "assetflow_test_shadowed.py", 'a = Asset("s3://x/a")\n')

    assert [d.value for d in load_definitions(tmp_path)] == [Asset("s3://x/a")]
    assert sys.modules["assetflow_test_shadowed"] is original


# --- modules ------------------------------------------------------------------------------------


def test_a_dotted_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forget_modules: list[str]) -> None:
    package = tmp_path / "assetflow_test_pkg"
    write(package, "__init__.py", "")
    write(package, "defs.py", 'a = Asset("s3://x/a")\np = Pipeline("p", a, SparkJob("j.py"))\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    forget_modules.append("assetflow_test_pkg")

    definitions = load_definitions("assetflow_test_pkg.defs")

    assert [(type(d.value).__name__, d.origin) for d in definitions] == [
        ("Asset", "assetflow_test_pkg.defs"),
        ("Pipeline", "assetflow_test_pkg.defs"),
    ]
    assert list(load_catalog("assetflow_test_pkg.defs").pipelines) == ["p"]
