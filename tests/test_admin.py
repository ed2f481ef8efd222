"""The Django admin: inspecting runs without ever showing a secret or loading every point."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from telemetry import services
from telemetry.ingest import Ingester
from telemetry.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client):
    user = get_user_model().objects.create_superuser("root", password="x")
    client.force_login(user)
    return client


@pytest.fixture
def run(home):
    org = services.org_get_or_create()
    run = services.run_create(
        org=org, command=["train"], layout_source='[[panel]]\ntitle = "Loss"\ny = "loss"\n'
    )
    with open(run.telemetry_path, "w") as f:
        for step in range(1, 1001):
            f.write(json.dumps({"step": step, "loss": 1 / step}) + "\n")
        f.write("not json\n")
    services.run_finish(run=run, exit_code=0)
    ingester = Ingester(run_ids=[run.pk])
    while ingester.tail_once():
        pass
    run.refresh_from_db()
    return run


def test_a_run_page_shows_its_keys_drops_and_layout(staff, run):
    page = staff.get(f"/admin/telemetry/run/{run.pk}/change/").content.decode()

    assert "loss" in page and "step" in page
    assert "not_json" in page
    assert "title = &quot;Loss&quot;" in page
    assert "1000 points" in page


def test_the_points_page_reads_one_page_of_points_however_many_the_run_has(staff, run):
    with CaptureQueriesContext(connection) as queries:
        page = staff.get(f"/admin/telemetry/point/?run__id__exact={run.pk}")

    assert page.status_code == 200
    assert len(page.context["cl"].result_list) == 100
    reads = [q["sql"] for q in queries if '"telemetry_point"."data"' in q["sql"]]
    assert reads and all("LIMIT 100" in sql for sql in reads)
    point = Run.objects.get().point_set.first()
    assert staff.get(f"/admin/telemetry/point/{point.pk}/change/").status_code == 200


def test_points_cannot_be_added_changed_or_deleted_in_the_admin(staff, run):
    point = run.point_set.order_by("seq").first()

    assert staff.get("/admin/telemetry/point/add/").status_code == 403
    assert staff.post(f"/admin/telemetry/point/{point.pk}/change/", {"seq": 5}).status_code == 403
    assert (
        staff.post(f"/admin/telemetry/point/{point.pk}/delete/", {"post": "yes"}).status_code == 403
    )
    point.refresh_from_db()
    assert point.seq == 1


def test_a_secret_value_is_never_shown(staff):
    org = services.org_get_or_create(name="acme")
    services.secret_set(org=org, name="HF_TOKEN", value="hf_s3cret_value")
    secret = org.secrets.get()

    for url in ["/admin/telemetry/secret/", f"/admin/telemetry/secret/{secret.pk}/change/"]:
        page = staff.get(url)
        assert page.status_code == 200
        assert "hf_s3cret_value" not in page.content.decode()
