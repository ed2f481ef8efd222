"""Logging in: a one-time link, as `div user add` and a first `div serve` print it."""

from __future__ import annotations

from django.test import Client

from telemetry import services

pytest_plugins = ["tests.personas"]


def test_a_login_link_logs_in_once(client, alice):
    link = services.login_link(user=alice, base="http://testserver")

    first = client.get(link)

    assert first.status_code == 302
    assert first["Location"] == "/"
    assert client.get("/api/runs/").status_code == 200

    again = Client().get(link)
    assert again.status_code == 404
    assert client.get(link).status_code == 404
