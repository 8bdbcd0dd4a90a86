"""Child processes for the local emulators: free ports, process groups, log tails and an exit safety net."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

logger = logging.getLogger(__name__)

#: The only address the emulators listen on (where the emulator lets us choose).
LOOPBACK = "127.0.0.1"

_PR_SET_PDEATHSIG = 1

_live_lock = threading.Lock()
_live: dict[int, subprocess.Popen[bytes]] = {}
_owner_pid: int | None = None


def free_port(host: str = LOOPBACK) -> int:
    """Return a TCP port that is free on `host` right now.

    The port is found by binding to port 0 and closing the socket, so another process can still take it
    before the caller binds it: callers that chose the port this way retry with a new one when the bind fails.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_accepts(host: str, port: int, timeout: float = 0.5) -> bool:
    """Return whether a TCP connection to host:port is accepted."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def log_size(path: Path) -> int:
    """Return the size of a log file in bytes (0 when it does not exist)."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def log_tail(path: Path, lines: int = 40, *, since: int = 0) -> str:
    """Return the last `lines` lines of a log file written after byte `since` ("" when there is none)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(since, size - 64 * 1024, 0))
            data = handle.read()
    except FileNotFoundError:
        return ""
    return "\n".join(data.decode("utf-8", errors="replace").splitlines()[-lines:])


def _parent_death_signal() -> Callable[[], None] | None:
    """Build a pre-exec hook that makes the child get SIGKILL when its parent dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return None
    # Resolved here, in the parent: the hook runs between fork and exec, where loading a library is unsafe.
    prctl = ctypes.CDLL(libc_name, use_errno=True).prctl
    parent = os.getpid()

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The parent may have died between fork and prctl; then nobody would send the signal.
        if os.getppid() != parent:
            os._exit(1)

    return hook


def spawn(
    command: Sequence[str],
    *,
    log_path: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    die_with_parent: bool = True,
) -> subprocess.Popen[bytes]:
    """Start `command` in a new session (its own process group), appending its output to `log_path`.

    The process is registered for the `atexit` safety net until `terminate` reaps it. With
    `die_with_parent` (Linux), the kernel also kills it if this Python process dies without running
    `atexit` hooks (SIGKILL, `os._exit`): note that the kernel sends that signal when the *thread* that
    started the process ends, so start emulators from the main thread or another long-lived one.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    hook = _parent_death_signal() if die_with_parent else None
    with log_path.open("ab") as log:
        process = subprocess.Popen(  # noqa: S603 - the commands are built by this package, never a shell
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=hook,  # only calls a pre-resolved prctl: safe enough with other threads running
        )
    _register(process)
    logger.debug(
        "process spawned", extra={"pid": process.pid, "command": list(command), "log": str(log_path)}
    )
    return process


def terminate(process: subprocess.Popen[bytes], timeout: float = 10.0) -> int:
    """Stop the process group led by `process`: SIGTERM, then SIGKILL after `timeout` seconds; reap it.

    Returns the leader's exit status (negative: the signal that ended it).
    """
    pgid = process.pid  # start_new_session makes the child its group's leader
    if process.poll() is None:
        _signal_group(pgid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            logger.warning("process ignored SIGTERM, killing it", extra={"pid": pgid, "timeout": timeout})
            _signal_group(pgid, signal.SIGKILL)
            process.wait()
    # Whatever the leader left behind in its group goes too.
    _signal_group(pgid, signal.SIGKILL)
    _unregister(process)
    return int(process.returncode)


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _register(process: subprocess.Popen[bytes]) -> None:
    global _owner_pid  # one registry per process, created on first use
    with _live_lock:
        if _owner_pid != os.getpid():
            # First use in this process (or in a forked child, which must not stop its parent's emulators).
            _live.clear()
            _owner_pid = os.getpid()
            atexit.register(_terminate_all)
        _live[process.pid] = process


def _unregister(process: subprocess.Popen[bytes]) -> None:
    with _live_lock:
        _live.pop(process.pid, None)


def live_processes() -> list[int]:
    """Return the ids of the emulator processes this Python process started and has not stopped yet."""
    with _live_lock:
        return list(_live)


def _terminate_all() -> None:
    """Stop every process still registered (the `atexit` safety net)."""
    if _owner_pid != os.getpid():
        return
    with _live_lock:
        processes = list(_live.values())
    for process in processes:
        logger.warning("stopping emulator left running at exit", extra={"pid": process.pid})
        terminate(process, timeout=5.0)
