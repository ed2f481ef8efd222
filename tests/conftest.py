from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def home(settings, tmp_path):
    """A DIVERGENT_HOME of the test's own: runs/ and their files land in tmp_path."""
    settings.DIVERGENT_HOME = tmp_path
    settings.RUNS_DIR = tmp_path / "runs"
    return tmp_path


def div_at(home: Path, *args: str, input: str | None = None, **env: str):
    """`div` on a home of its own, as a first try meets it: a process of its own, SQLite in the
    home (unless env names a DATABASE_URL) and the key kept there."""
    own = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "SECRET_KEY")}
    return subprocess.run(
        [sys.executable, "-m", "divergent", *args],
        env={**own, "DIVERGENT_HOME": str(home), **env},
        cwd=ROOT,
        input=input,
        capture_output=True,
        text=True,
        timeout=60,
    )


def database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgres://{db.get('USER') or 'postgres'}@{host}:{port}/{db['NAME']}"


@pytest.fixture
def div(home, transactional_db):
    """Runs `div …` as a user would: a process of its own, on the test's database and home."""
    env = {**os.environ, "DIVERGENT_HOME": str(home), "DATABASE_URL": database_url()}
    # The test's own key: a login link or session made here is good in a server started here.
    env["SECRET_KEY"] = str(settings.SECRET_KEY)

    def run(
        *args: str, input: str | None = None, timeout: float = 60, **more: str
    ) -> subprocess.CompletedProcess:
        """div ARGS, with `more` set in its environment besides the test's."""
        return subprocess.run(
            [sys.executable, "-m", "divergent", *args],
            input=input,
            capture_output=True,
            text=True,
            env={**env, **more},
            cwd=ROOT,
            timeout=timeout,
        )

    run.env = env
    return run


def wait_for(condition, timeout: float = 20.0, what: str = "the condition"):
    """Poll until condition() is truthy; fail with `what` at the deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """Connections are closed after each use in tests: a connection kept open by a worker
    thread would stop PostgreSQL from dropping the test database at the end."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    db["CONN_MAX_AGE"] = 0
    if db["ENGINE"].endswith("sqlite3"):
        # A database of this run's own: another run in the same checkout meanwhile (one file's
        # tests while the rest run) would otherwise remake and delete the same file under it,
        # and each would fail with "disk I/O error" wherever the other happened to be.
        db["TEST"]["NAME"] = settings.DIVERGENT_HOME / f"test-{os.getpid()}.sqlite3"
    # The SQLite test database lives in DIVERGENT_HOME, which a clean clone has yet to make.
    settings.DIVERGENT_HOME.mkdir(parents=True, exist_ok=True)


def pytest_collection_modifyitems(items):
    """Marks the tests the PostgreSQL pass runs again (`make test-postgres`): every test that
    touches the database, whichever fixture brings it in, and the browser tests apart."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & {"db", "transactional_db"} or item.get_closest_marker("django_db"):
            item.add_marker(pytest.mark.database)
        if "browser" in fixtures:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(autouse=True)
def no_login_of_this_machines(monkeypatch, tmp_path_factory):
    """Every `div` a test runs is local unless the test gives it a token: no test reads the
    config file a `div login` on this machine wrote, nor a DIVERGENT_TOKEN of its shell."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))
    monkeypatch.delenv("DIVERGENT_TOKEN", raising=False)
