"""A command that only reads, on a database that is missing, empty or older than this div: one
line that says `div migrate` puts it right, and nothing in the home or the database changed."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from django.db import connection

from tests.conftest import div_at
from tests.test_cli import one_line_error

READERS = (["telemetry"], ["telemetry", "run-1"], ["telemetry", "run-1", "loss"], ["log", "run-1"])
SET_UP = "div migrate sets it up (div run and div serve do too)"
UP_TO_DATE = "was set up by an older div; div migrate brings it up to date"


def div_on(home: Path, database_url: str | None = None):
    return partial(div_at, home, **({} if database_url is None else {"DATABASE_URL": database_url}))


def files_of(home: Path) -> dict[str, int]:
    return {path.name: path.stat().st_size for path in home.iterdir()}


def test_reading_an_empty_database_file_says_what_to_do_and_leaves_it_empty(tmp_path):
    """The 0-byte file an older div's reader left behind stays 0 bytes: no WAL database made of
    it, no home-id beside it."""
    (tmp_path / "divergent.sqlite3").touch()
    div = div_on(tmp_path)

    for args in READERS:
        one_line_error(div(*args), 1, f"div: {tmp_path} has no database yet; {SET_UP}")
    assert files_of(tmp_path) == {"divergent.sqlite3": 0}


def test_reading_a_home_an_older_div_migrated_says_div_migrate_brings_it_up_to_date(tmp_path):
    div = div_on(tmp_path)
    assert div("migrate", "telemetry", "0003").returncode == 0
    before = files_of(tmp_path)

    for args in READERS:
        one_line_error(div(*args), 1, f"div: the database in {tmp_path} {UP_TO_DATE}")
    assert files_of(tmp_path) == before

    assert div("migrate").returncode == 0
    listed = div("telemetry")
    assert (listed.returncode, listed.stdout) == (0, "name  status  points  keys  created\n")


@pytest.fixture
def scratch_postgres(db):
    """A database of its own on the test's PostgreSQL server, made empty and dropped after."""
    if connection.vendor != "postgresql":
        pytest.skip("a PostgreSQL database of its own")
    import psycopg

    settings = connection.settings_dict
    host, port, user = settings["HOST"] or "127.0.0.1", settings["PORT"] or 5432, settings["USER"]
    name = f"{settings['NAME']}_scratch"
    server = psycopg.connect(host=host, port=port, user=user, dbname="postgres", autocommit=True)
    server.execute(f'DROP DATABASE IF EXISTS "{name}"')
    server.execute(f'CREATE DATABASE "{name}"')
    try:
        # A password in the URL, as a deployment's would have: it is never printed.
        yield f"postgres://{user}:hunter2-secret@{host}:{port}/{name}", f"{name} on {host}:{port}"
    finally:
        server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        server.close()


def test_reading_an_empty_postgresql_database_names_it_and_leaves_the_home_unmade(
    tmp_path, scratch_postgres
):
    url, named = scratch_postgres
    home = tmp_path / "fresh"
    div = div_on(home, url)

    for args in READERS:
        one_line_error(
            div(*args), 1, f"div: the PostgreSQL database {named} has no tables yet; {SET_UP}"
        )
    assert not home.exists()

    assert div("migrate", "telemetry", "0003").returncode == 0
    for args in READERS:
        one_line_error(div(*args), 1, f"div: the PostgreSQL database {named} {UP_TO_DATE}")
    assert not (home / "home-id").exists()
