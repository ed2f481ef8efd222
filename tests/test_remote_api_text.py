"""Bodies of text no field can hold, sent by hand to the API the remote `div` speaks: a lone
surrogate (JSON's "\\ud800" escape alone) anywhere, or a NUL in what PostgreSQL stores as text,
is a 400 in one line; before, each was a 500 (the surrogates on every database)."""

from __future__ import annotations

import json

import pytest

from telemetry import services
from telemetry.client_api import HAS_NUL
from telemetry.models import Run, Token
from telemetry.parsers import NOT_TEXT
from tests.test_remote_api import alices, made, token_of  # noqa: F401  (fixtures)

pytest_plugins = ["tests.personas"]


def posted(client, path: str, body, method: str = "post"):
    # json.dumps writes a lone surrogate as its escape, as a hand-made body would.
    return getattr(client, method)(path, json.dumps(body), content_type="application/json")


@pytest.mark.parametrize(
    "body",
    [
        {"command": ["python", "x\ud800"]},
        {"host": "gpu\udfff"},
        {"org": "\ud800"},
        {"layout": {"source": "", "origin": "t\ud800.toml"}},
        {"extra": {"\ud800": 1}},
    ],
    ids=lambda body: next(iter(body)),
)
def test_a_lone_surrogate_anywhere_in_a_run_asked_for_is_a_400(home, alice, token_of, body):  # noqa: F811
    answer = made(token_of(alice), **body)

    assert (answer.status_code, answer.json()) == (400, {"detail": NOT_TEXT})
    assert not Run.objects.exists()


def test_a_lone_surrogate_in_a_secret_a_token_or_a_beat_is_a_400(alices, alice):  # noqa: F811
    client, run = alices
    asked = [
        posted(client, "/api/orgs/acme/secrets/HF_TOKEN/", {"value": "hf_\ud800_value"}, "put"),
        posted(client, "/api/tokens/", {"name": "lap\ud800top"}),
        posted(client, f"/api/runs/{run.name}/heartbeat/", {"host": "gpu\ud800", "pid": 1}),
    ]

    assert [(a.status_code, a.json()) for a in asked] == [(400, {"detail": NOT_TEXT})] * 3
    assert services.secrets_of(run.org_id) == {}
    assert Token.objects.filter(user=alice).count() == 1


@pytest.mark.parametrize(
    "body, field",
    [
        ({"command": ["python", "train.py\x00"]}, "command"),
        ({"host": "gpu\x007"}, "host"),
        ({"layout": {"source": "", "origin": "tele\x00metry.toml"}}, "origin"),
    ],
)
def test_a_nul_in_a_runs_command_host_or_layouts_path_is_a_400(home, alice, token_of, body, field):  # noqa: F811
    answer = made(token_of(alice), **body)

    assert (answer.status_code, answer.json()) == (400, {"error": HAS_NUL.format(field=field)})
    assert not Run.objects.exists()


def test_a_nul_in_a_beats_host_is_a_400_and_changes_nothing(alices):  # noqa: F811
    client, run = alices
    answer = posted(client, f"/api/runs/{run.name}/heartbeat/", {"host": "gpu\x00", "pid": 1})

    assert (answer.status_code, answer.json()) == (400, {"error": HAS_NUL.format(field="host")})
    run.refresh_from_db()
    assert (run.supervisor_host, run.supervisor_pid) == ("gpu-7", 4242)


def test_revoking_a_token_no_name_can_be_is_the_line_of_one_that_is_not_there(alice, token_of):  # noqa: F811
    answer = token_of(alice).delete("/api/tokens/lap%00top/")

    assert (answer.status_code, answer.json()) == (
        400,
        {"error": 'alice has no token "lap\x00top"; div token list shows them'},
    )
    assert Token.objects.filter(user=alice).count() == 1
