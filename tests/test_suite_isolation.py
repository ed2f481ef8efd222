"""The test suite itself: two runs of it in one checkout at once (one file's tests while the
rest run, say) never share a SQLite database, so neither fails for the other's. On PostgreSQL
each run's database is named by its DATABASE_URL (`make test-postgres`)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.conf import settings

from telemetry import services
from telemetry.models import Org
from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(
    not settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"),
    reason="a PostgreSQL test database is named by DATABASE_URL",
)


@pytest.mark.django_db
def test_another_run_of_the_tests_meanwhile_leaves_this_runs_database_as_it_was():
    services.org_get_or_create(name="kept")

    other = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_dashboard_api.py::test_no_runs_is_one_empty_page",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert other.returncode == 0, other.stdout[-2000:]
    assert list(Org.objects.filter(name="kept").values_list("name", flat=True)) == ["kept"]
