"""Asset URI rules against Apache Airflow's own, recorded in tests/fixtures/airflow/uri_corpus.json.

The corpus is written by scripts/airflow_corpus.py with Airflow installed (see its docstring). Each URI
must come out of ``normalize_uri`` exactly as it comes out of Airflow's ``Asset``, or be refused when
Airflow refuses it, except for the deliberate differences listed in ``DELIBERATE``.
"""

from __future__ import annotations

import importlib.util
import json
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from assetflow.core.uri import AssetUriError, normalize_uri

ROOT = Path(__file__).resolve().parents[2]
CORPUS = json.loads((ROOT / "tests" / "fixtures" / "airflow" / "uri_corpus.json").read_text())
ENTRIES: list[dict[str, Any]] = CORPUS["entries"]


def _split(uri: str) -> urllib.parse.SplitResult | None:
    # Non-ASCII stands in as "_": it is never a delimiter, so the parts stay where they are.
    try:
        return urllib.parse.urlsplit(re.sub(r"[^\x00-\x7f]", "_", uri))
    except ValueError:  # Airflow refuses these too: no difference to excuse
        return None


def _password(uri: str) -> str | None:
    parts = _split(uri)
    return (parts.password or None) if parts is not None else None


def _checked_scheme(uri: str) -> str:
    """The scheme when Airflow looks further than it, else ''."""
    parts = _split(uri)
    if parts is None or parts.scheme.startswith("x-"):
        return ""
    return parts.scheme


def _query_not_utf8(uri: str) -> bool:
    parts = _split(uri)
    if parts is None or not _checked_scheme(uri):
        return False
    try:
        urllib.parse.parse_qsl(parts.query, errors="strict")
    except UnicodeDecodeError:
        return True
    return False


def _path_would_become_a_host(uri: str) -> bool:
    parts = _split(uri)
    if parts is None or not _checked_scheme(uri):
        return False
    return not parts.netloc and parts.path.rstrip("/").startswith("//")


@dataclass(frozen=True)
class Difference:
    """A deliberate difference from Airflow: we refuse what Airflow accepts, and why."""

    applies: Callable[[str], bool]
    reason: str


#: Every place where we deliberately differ from Airflow. In each we refuse a URI Airflow accepts.
DELIBERATE: dict[str, Difference] = {
    "password": Difference(
        lambda uri: _password(uri) is not None,
        "Airflow drops the userinfo with a warning (and keeps it in x- and scheme-less URIs); we refuse "
        "the URI, without echoing the password, so a secret is never stored in or silently cut from an "
        "identity that is shown in clear text (DESIGN 3.1). A user name alone is accepted, as in Airflow.",
    ),
    "non-ASCII": Difference(
        lambda uri: not uri.isascii(),
        "Airflow's docs call non-ASCII invalid, but its SDK refuses it only with a MySQL metadata "
        "database (recorded as airflow_mysql_metadata_db); we refuse it everywhere (DESIGN 3.1).",
    ),
    "assetflow scheme": Difference(
        lambda uri: _checked_scheme(uri) == "assetflow",
        "reserved for our own internals, as Airflow reserves 'airflow'.",
    ),
    "query bytes not UTF-8": Difference(
        _query_not_utf8,
        "Airflow decodes them to U+FFFD, so '?a=%FF' and '?a=%FE' become one asset; we refuse the URI.",
    ),
    "path read back as a host": Difference(
        _path_would_become_a_host,
        "with no authority and a path starting with '//', Airflow writes 'foo:////x' as 'foo://x', whose "
        "first path segment reads back as a host; we refuse the URI.",
    ),
}


def deliberate_difference(uri: str) -> str | None:
    """The name of the deliberate difference that covers ``uri``, if any."""
    return next((name for name, difference in DELIBERATE.items() if difference.applies(uri)), None)


def ours(uri: str) -> dict[str, Any]:
    try:
        return {"uri": normalize_uri(uri)}
    except AssetUriError as exc:
        return {"error": str(exc)}


def agrees(entry: dict[str, Any], outcome: dict[str, Any]) -> bool:
    airflow = entry["airflow"]
    if "error" in airflow:
        return "error" in outcome
    return bool(outcome.get("uri") == airflow["uri"])


def _entry_id(entry: dict[str, Any]) -> str:
    text = ascii(entry["input"])
    return text if len(text) <= 60 else f"{text[:40]}...{len(entry['input'])}chars"


@pytest.mark.parametrize("entry", ENTRIES, ids=_entry_id)
def test_normalize_uri_agrees_with_airflow(entry: dict[str, Any]) -> None:
    uri = entry["input"]
    outcome = ours(uri)
    difference = deliberate_difference(uri)
    if difference is None:
        assert agrees(entry, outcome), f"Airflow: {entry['airflow']}, assetflow: {outcome}"
        if "uri" in outcome:
            assert normalize_uri(outcome["uri"]) == outcome["uri"]
        return
    assert "error" in outcome, f"{difference}: {DELIBERATE[difference].reason}"
    assert outcome["error"].startswith("invalid asset URI ")
    if (password := _password(uri)) is not None:
        assert password not in outcome["error"]


def test_every_deliberate_difference_is_one_on_the_corpus() -> None:
    exercised = {deliberate_difference(e["input"]) for e in ENTRIES if "uri" in e["airflow"]}
    assert exercised - {None} == set(DELIBERATE)


def test_the_corpus_is_large_and_records_its_versions() -> None:
    assert len(ENTRIES) >= 300
    assert CORPUS["versions"]["apache-airflow-task-sdk"] != "not installed"
    assert [e["input"] for e in ENTRIES] == sorted({e["input"] for e in ENTRIES})


def test_refusals_say_what_is_wrong_and_how_to_fix_it() -> None:
    for entry in ENTRIES:
        outcome = ours(entry["input"])
        if "error" in outcome:
            problem, _, fix = outcome["error"].partition("; ")
            assert "asset URI" in problem and fix, outcome["error"]


def _load_corpus_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("airflow_corpus", ROOT / "scripts" / "airflow_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_sample_agrees_with_airflow_computed_live(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))  # Airflow makes $AIRFLOW_HOME/logs on import
    pytest.importorskip(
        "airflow.sdk",
        reason="Airflow's task SDK is not installed here; the recorded corpus stands in for it "
        "(scripts/airflow_corpus.py says which environment has it)",
    )
    script = _load_corpus_script()
    same_versions = script.versions() == CORPUS["versions"]
    for entry in ENTRIES[::7]:
        live = {"input": entry["input"], "airflow": script.airflow_outcome(entry["input"])}
        if same_versions:
            assert live["airflow"] == entry["airflow"], "the corpus is stale: run scripts/airflow_corpus.py"
        if deliberate_difference(entry["input"]) is None:
            assert agrees(live, ours(entry["input"])), live
        else:
            assert "error" in ours(entry["input"])
