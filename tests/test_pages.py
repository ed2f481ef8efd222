"""The pages around the API: the dashboard and a run's page, for members and outsiders."""

from __future__ import annotations

import pytest

pytest_plugins = ["tests.personas"]

ODD_NAMES = ["run-²", "run-99999999999999999999999"]  # a digit to str.isdigit(), not int()


def test_a_member_opens_the_run_page(client, alice, shown):
    client.force_login(alice)

    assert client.get(f"/runs/{shown.name}/").status_code == 200


def test_an_outsider_gets_a_404_page_for_the_run(client, eve, shown):
    client.force_login(eve)

    assert client.get(f"/runs/{shown.name}/").status_code == 404


@pytest.mark.parametrize("name", ODD_NAMES)
def test_a_run_name_of_odd_digits_is_a_404_page_not_a_500(client, alice, shown, name):
    client.force_login(alice)
    client.raise_request_exception = False

    assert client.get(f"/runs/{name}/").status_code == 404


def test_the_dashboard_sends_anonymous_to_log_in(client):
    response = client.get("/")

    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/"
