"""A throw-away PostgreSQL server for tests and local development, from Debian's `postgresql-15`.

    python -m ops.postgres run [--port 5432]      # prints the DSN, runs until Ctrl-C

No Docker and no mock: the tests of `seqstream sink postgres` need the real server's transactions,
locks and jsonb. The cluster lives in a temporary directory and is built for speed, not
durability (`fsync=off`, `full_page_writes=off`): a test database is thrown away anyway.

PostgreSQL refuses to run as root, so when we are root (containers, CI) `initdb` and `pg_ctl` run
as the system user `postgres` (`runuser`), in a directory that user owns.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HOST = "127.0.0.1"
SYSTEM_USER = "postgres"
SUPERUSER = "postgres"
DATABASE = "postgres"
# Debian's layout; PG_BINDIR points elsewhere (another version, a source build).
DEFAULT_BINDIR = "/usr/lib/postgresql/15/bin"
INSTALL_HINT = "apt-get install postgresql-15 (Debian, Ubuntu), or set PG_BINDIR to where initdb and pg_ctl are"
START_TIMEOUT_S = 60


def bindir() -> Path:
    return Path(os.environ.get("PG_BINDIR", DEFAULT_BINDIR))


def missing_binaries() -> str | None:
    """Why no server can be started here, or None when initdb and pg_ctl are in place."""
    directory = bindir()
    absent = [name for name in ("initdb", "pg_ctl", "postgres") if not (directory / name).exists()]
    if absent:
        return f"PostgreSQL binaries {', '.join(absent)} not found in {directory}: {INSTALL_HINT}"
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One postmaster on 127.0.0.1:`port` and a unix socket in its own temporary directory."""

    def __init__(self, port: int = 0) -> None:
        self.port = port or free_port()
        self.root: Path | None = None
        self._postmaster_pid: int | None = None

    @property
    def dsn(self) -> str:
        return f"host={HOST} port={self.port} user={SUPERUSER} dbname={DATABASE}"

    @property
    def socket_dsn(self) -> str:
        assert self.root is not None
        return f"host={self.root / 'socket'} port={self.port} user={SUPERUSER} dbname={DATABASE}"

    @property
    def log_path(self) -> Path:
        assert self.root is not None
        return self.root / "postgres.log"

    def start(self) -> str:
        why = missing_binaries()
        if why is not None:
            raise RuntimeError(why)
        # Under /tmp, not pytest's tmp dirs: those are private to root (0700) and the postgres user
        # could not enter them.
        self.root = Path(tempfile.mkdtemp(prefix="seqstream-pg-"))
        (self.root / "socket").mkdir()
        if os.geteuid() == 0:
            account = pwd.getpwnam(SYSTEM_USER)
            for path in (self.root, self.root / "socket"):
                os.chown(path, account.pw_uid, account.pw_gid)
        atexit.register(self.stop)
        data = self.root / "data"
        # trust: only this machine's loopback and socket reach it, and the tests need no password.
        self._run(["initdb", "-D", str(data), "-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"])
        options = (
            f"-p {self.port} -k {self.root / 'socket'} -c listen_addresses={HOST}"
            " -c fsync=off -c full_page_writes=off -c synchronous_commit=off"
        )
        try:
            wait = ["-w", "-t", str(START_TIMEOUT_S)]
            self._run(["pg_ctl", "-D", str(data), "-l", str(self.log_path), "-o", options, *wait, "start"])
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}\n{self.log_tail()}") from None
        self._postmaster_pid = int((data / "postmaster.pid").read_text().split()[0])
        return self.dsn

    def stop(self, timeout_s: float = 30) -> None:
        """Fast shutdown (open transactions roll back); kill -9 if it does not go in time."""
        atexit.unregister(self.stop)
        if self.root is None:
            return
        if self._postmaster_pid is not None and _alive(self._postmaster_pid):
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                self._run(
                    ["pg_ctl", "-D", str(self.root / "data"), "-m", "fast", "-w", "-t", str(int(timeout_s)), "stop"],
                    timeout_s=timeout_s + 5,
                )
            self._kill()
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None

    def log_tail(self, lines: int = 40) -> str:
        if self.root is None or not self.log_path.exists():
            return "(no postgres.log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def _kill(self) -> None:
        # pg_ctl starts the postmaster in a session of its own, so its process group holds the
        # postmaster and every backend: one signal reaches them all and nothing of ours.
        pid, self._postmaster_pid = self._postmaster_pid, None
        if pid is None or not _alive(pid):
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)

    def _run(self, command: list[str], timeout_s: float = START_TIMEOUT_S + 30) -> None:
        argv = [str(bindir() / command[0]), *command[1:]]
        if os.geteuid() == 0:
            argv = ["runuser", "-u", SYSTEM_USER, "--", *argv]
        # stdout to a file, not a pipe: the postmaster that pg_ctl leaves running inherits it, and
        # a pipe would keep this call waiting for its end until the server stops.
        assert self.root is not None
        with (self.root / "commands.log").open("ab") as log:
            result = subprocess.run(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s, check=False
            )
        if result.returncode != 0:
            output = (self.root / "commands.log").read_text(errors="replace")[-4000:]
            raise RuntimeError(f"{' '.join(command[:1])} failed (rc={result.returncode}):\n{output}")

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # the postgres user's process, seen from a non-root user
        return True
    # A zombie (exited, not yet reaped by its parent) still answers signal 0.
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1] != "Z"
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.postgres", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a throw-away server in the foreground until SIGINT/SIGTERM")
    run.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0 = any free)")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    server = PostgresServer(args.port)
    try:
        print(f"SEQSTREAM_SINK__DSN='{server.start()}'", flush=True)
        stop.wait()
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
