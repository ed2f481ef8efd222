"""The Django admin: inspecting runs without ever showing a secret or loading every point."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from telemetry import queries, services
from telemetry.ingest import Ingester

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client):
    user = get_user_model().objects.create_superuser("root", password="x")
    client.force_login(user)
    return client


def ended_run(points: int):
    org = services.org_get_or_create()
    run = services.run_create(
        org=org, command=["train"], layout_source='[[panel]]\ntitle = "Loss"\ny = "loss"\n'
    )
    with open(run.telemetry_path, "w") as f:
        for step in range(1, points + 1):
            f.write(json.dumps({"step": step, "loss": 1 / step}) + "\n")
        f.write("not json\n")
    services.run_finish(run=run, exit_code=0)
    ingester = Ingester(run_ids=[run.pk])
    while ingester.tail_once():
        pass
    run.refresh_from_db()
    return run


@pytest.fixture
def run(home):
    return ended_run(1000)


def test_a_run_page_shows_its_keys_drops_and_layout(staff, run):
    page = staff.get(f"/admin/telemetry/run/{run.pk}/change/").content.decode()

    assert "loss" in page and "step" in page
    assert "not_json" in page
    assert "title = &quot;Loss&quot;" in page
    assert "1000 points" in page


def test_the_points_page_reads_one_page_of_points_however_many_the_run_has(staff, home):
    run = ended_run(3000)

    with CaptureQueriesContext(connection) as captured:
        page = staff.get(f"/admin/telemetry/run/{run.pk}/points/?page=25")

    assert page.status_code == 200
    shown = page.context["points"]
    assert [seq for seq, _ in shown] == list(range(2401, 2501))
    assert json.loads(shown[0][1]) == {"step": 2401, "loss": 1 / 2401}
    # Seqs 2401 to 2500 are in the third window of 1,024 points: only its chunks are read.
    reads = [q["sql"] for q in captured if "telemetry_chunk" in q["sql"]]
    assert reads and all("BETWEEN 2 AND 2" in sql for sql in reads)


def test_points_cannot_be_added_changed_or_deleted_in_the_admin(staff, run):
    assert staff.get("/admin/telemetry/point/add/").status_code == 404
    assert staff.get("/admin/telemetry/point/1/change/").status_code == 404
    assert staff.post(f"/admin/telemetry/run/{run.pk}/points/", {"seq": 5}).status_code == 405

    assert next(queries.points(run.pk)) == (1, {"step": 1, "loss": 1.0})


def test_a_secret_value_is_never_shown(staff):
    org = services.org_get_or_create(name="acme")
    services.secret_set(org=org, name="HF_TOKEN", value="hf_s3cret_value")
    secret = org.secrets.get()

    for url in ["/admin/telemetry/secret/", f"/admin/telemetry/secret/{secret.pk}/change/"]:
        page = staff.get(url)
        assert page.status_code == 200
        assert "hf_s3cret_value" not in page.content.decode()


@pytest.mark.parametrize(
    "page, lookup, value",
    [
        ("telemetry/run", "status__regex", "("),  # a pattern the database cannot read
        ("telemetry/run", "command__0__regex", "("),
        ("telemetry/org", "name__regex", "("),
        ("telemetry/token", "name__regex", "("),
        ("auth/user", "username__regex", "("),
    ],
)
def test_a_filter_the_database_cannot_answer_is_the_admins_error_page_not_a_500(
    staff, run, page, lookup, value
):
    client = staff
    client.raise_request_exception = False
    services.token_create(user=get_user_model().objects.get(), name="laptop")  # a row to match

    response = client.get(f"/admin/{page}/", {lookup: value})

    # As Django's admin answers a lookup it cannot make: back to the list, flagged with ?e=1.
    assert response.status_code == 302
    assert response["Location"].endswith(f"/admin/{page}/?e=1")
    assert client.get(response["Location"]).status_code == 200
    again = client.get(f"/admin/{page}/", {lookup: value, "e": "1"})  # typed with the flag
    assert again.status_code == 400 and "Database error" in again.content.decode()


def test_a_json_lookup_the_database_lacks_is_the_admins_error_page_not_a_500(staff, run):
    staff.raise_request_exception = False

    response = staff.get("/admin/telemetry/run/", {"command__contains": "train"})

    if connection.vendor == "sqlite":  # SQLite has no JSON containment
        assert response.status_code == 302 and response["Location"].endswith("?e=1")
    else:
        assert response.status_code == 200 and "1 run" in response.content.decode()
