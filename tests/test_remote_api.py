"""The API the remote `div` speaks, attacked as an outsider would: logged out, with another
org's token, a teammate's token on alice's run, hostile offsets and bodies (docs/api.md)."""

from __future__ import annotations

import json
import os
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from telemetry import authentication, receiving, services
from telemetry.client_api import NOT_HELD, NOT_REMOTE, NOT_YOURS
from telemetry.models import Run, Token

pytest_plugins = ["tests.personas"]

BAD_LAYOUT = 'x = "step"\n[[panel]]\ny = "loss"\n\n[[panel]]\ny = "loss"\nscael = "log"\n'
SPEC_LINE = (
    'the API refused the run: telemetry [[panel]] 2 has "scael", which is not one of '
    "title, x, y, scale, min, max, rule, wide"
)


def bearer(text: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {text}")


@pytest.fixture
def token_of(db):
    def make(user) -> Client:
        return bearer(services.token_create(user=user)[1])

    return make


def made(client: Client, **body) -> dict:
    body = {
        "org": "acme",
        "command": ["python", "train.py", "--key", "hf_secret_in_argv"],
        "layout": {"source": "", "origin": ""},
        "host": "gpu-7",
        "pid": 4242,
        **body,
    }
    return client.post("/api/runs/", json.dumps(body), content_type="application/json")


@pytest.fixture
def alices(home, alice, token_of):
    """Alice's client, and a run she made over the API."""
    client = token_of(alice)
    answer = made(client)
    assert answer.status_code == 201, answer.content
    return client, Run.objects.get(pk=int(answer.json()["name"].removeprefix("run-")))


def upload(client: Client, run, kind: str, offset, data: bytes, **headers):
    return client.post(
        f"/api/runs/{run.name}/files/{kind}/?offset={offset}",
        data,
        content_type="application/octet-stream",
        headers=headers,
    )


def end(client: Client, run, code: int = 0, **sizes):
    body = {"exit_code": code, "telemetry": 0, "log": 0, **sizes}
    return client.post(f"/api/runs/{run.name}/end/", body, content_type="application/json")


# ---- tokens ---------------------------------------------------------------------------------


def test_a_token_sees_what_its_user_sees_and_another_orgs_run_is_a_404(shown, alice, eve, token_of):
    assert token_of(alice).get(f"/api/runs/{shown.name}/").status_code == 200
    outsider = token_of(eve)
    theirs = outsider.get(f"/api/runs/{shown.name}/")
    none = outsider.get("/api/runs/run-999/")
    assert (
        (theirs.status_code, theirs.json())
        == (none.status_code, none.json())
        == (
            404,
            {"detail": "Not found."},
        )
    )
    assert outsider.get("/api/runs/").json() == {"runs": []}
    assert outsider.get("/api/runs/listing/").json() == {"runs": []}
    assert outsider.get(f"/api/runs/{shown.name}/log/bytes/").status_code == 404


@pytest.mark.parametrize(
    "header, said",
    [
        ("Bearer", authentication.MALFORMED),
        ("Bearer one two", authentication.MALFORMED),
        ("Bearer div_nobody-has-this", authentication.UNKNOWN_TOKEN),
        ("bearer div_nobody-has-this", authentication.UNKNOWN_TOKEN),
    ],
)
def test_a_bad_token_is_a_401_that_says_what_to_do(shown, header, said):
    answer = Client(HTTP_AUTHORIZATION=header).get("/api/runs/")

    assert (answer.status_code, answer.json()) == (401, {"detail": said})
    assert answer["WWW-Authenticate"] == 'Bearer realm="divergent"'


def test_without_a_token_or_a_session_the_api_stays_a_403(shown):
    assert Client().get("/api/runs/").status_code == 403
    assert Client().post("/api/runs/", {}, content_type="application/json").status_code == 403


def test_a_revoked_token_and_an_inactive_user_stop_at_once(shown, alice):
    token, text = services.token_create(user=alice, name="laptop")
    assert bearer(text).get("/api/runs/").status_code == 200

    services.token_revoke(user=alice, name="laptop")
    assert bearer(text).get("/api/runs/").json() == {"detail": authentication.UNKNOWN_TOKEN}

    _, text = services.token_create(user=alice, name="laptop")
    alice.is_active = False
    alice.save()
    assert bearer(text).get("/api/runs/").json() == {"detail": authentication.INACTIVE}


def test_every_answer_of_the_api_says_it_is_div_serves_and_no_other_does(shown, alice, token_of):
    client = token_of(alice)
    answers = [
        client.get("/api/runs/"),
        client.get("/api/runs/run-999/"),
        client.get(f"/api/runs/{shown.name}/log/bytes/"),
        client.post("/api/runs/", "[]", content_type="application/json"),
        bearer("div_nobody-has-this").get("/api/me/"),
        Client().get("/api/tokens/"),
    ]
    assert [a.status_code for a in answers] == [200, 404, 200, 400, 401, 403]
    assert [a.get("Divergent-API") for a in answers] == ["1"] * len(answers)
    for elsewhere in ("/api/no-such-thing/", "/", "/login/"):
        assert Client().get(elsewhere).get("Divergent-API") is None, elsewhere


def test_a_tokens_last_use_is_written_at_most_once_a_minute(shown, alice):
    token, text = services.token_create(user=alice)
    bearer(text).get("/api/runs/")
    first = Token.objects.get().last_used
    assert first is not None
    bearer(text).get("/api/runs/")
    assert Token.objects.get().last_used == first

    Token.objects.update(last_used=timezone.now() - timedelta(seconds=61))
    bearer(text).get("/api/runs/")
    assert Token.objects.get().last_used > first


def test_the_database_keeps_only_a_digest_of_a_token(alice):
    _, text = services.token_create(user=alice)

    stored = json.dumps(list(Token.objects.values()), default=str)
    assert text not in stored and text.removeprefix(services.TOKEN_PREFIX) not in stored
    assert Token.objects.get().digest == services.token_digest(text)


def test_tokens_over_the_api_are_the_users_own(alice, bob, token_of):
    client = token_of(alice)
    made_one = client.post("/api/tokens/", {"name": "laptop"}, content_type="application/json")
    assert made_one.status_code == 201
    assert made_one.json()["token"].startswith("div_")
    listed = client.get("/api/tokens/").json()["tokens"]
    assert [t["name"] for t in listed] == ["laptop", "token-1"]
    assert all(set(t) == {"name", "created", "last_used"} for t in listed)

    services.token_create(user=bob, name="bobs")
    assert client.delete("/api/tokens/bobs/").json() == {
        "error": 'alice has no token "bobs"; div token list shows them'
    }
    assert client.delete("/api/tokens/laptop/").status_code == 204
    assert Token.objects.filter(user=bob).count() == 1


# ---- making a run ---------------------------------------------------------------------------


def test_a_run_made_over_the_api_is_remote_its_command_masked_and_its_secrets_given(
    home, alice, token_of
):
    services.secret_put(org="acme", name="HF_TOKEN", value="hf_secret_in_argv")

    answer = made(token_of(alice), org=None)

    run = Run.objects.get()
    assert answer.status_code == 201
    assert answer.json() == {
        "name": run.name,
        "org": "acme",
        "secrets": {"HF_TOKEN": "hf_secret_in_argv"},
    }
    assert (run.remote, run.creator, run.supervisor_host, run.supervisor_pid) == (
        True,
        alice,
        "gpu-7",
        4242,
    )
    assert run.command == ["python", "train.py", "--key", "***"]
    assert run.started is not None and run.files_path.is_dir()


def test_a_layout_the_server_cannot_read_is_the_specs_400_and_makes_nothing(home, alice, token_of):
    answer = made(token_of(alice), layout={"source": BAD_LAYOUT, "origin": "telemetry.toml"})

    assert (answer.status_code, answer.json()) == (400, {"error": SPEC_LINE})
    assert not Run.objects.exists()
    assert not list(home.glob("runs/*"))


@pytest.mark.parametrize(
    "body, said",
    [
        ({"org": "other"}, 'you have no org "other"; yours: acme'),
        ({"org": "nope"}, 'you have no org "nope"; yours: acme'),
        ({"command": []}, services.NO_COMMAND),
        (
            {"command": "python train.py"},
            'send a JSON object with "org", "command", "layout", "host", "pid"',
        ),
        ({"command": [1, 2]}, 'send a JSON object with "command" (strings) and "layout"'),
        ({"pid": 2**40}, 'send a JSON object with "org", "command", "layout", "host", "pid"'),
        ({"pid": True}, 'send a JSON object with "org", "command", "layout", "host", "pid"'),
    ],
)
def test_a_run_asked_for_wrongly_is_a_400_saying_what_to_change(
    home, alice, eve, token_of, body, said
):
    answer = made(token_of(alice), **body)

    assert (answer.status_code, answer.json()) == (400, {"error": said})
    assert not Run.objects.exists()


def test_without_org_a_run_goes_to_the_users_only_org_and_else_asks(home, eve, alice, token_of):
    assert made(token_of(eve), org=None).json()["org"] == "other"
    services.org_add(name="lab", members=["eve"])
    assert made(token_of(eve), org=None).json() == {
        "error": "name the run's org with --org; yours: lab, other"
    }


def test_a_session_must_send_csrf_to_make_a_run(home, alice):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)

    answer = made(browser)

    assert answer.status_code == 403 and "CSRF" in answer.json()["detail"]


# ---- uploading ------------------------------------------------------------------------------


def test_a_chunk_repeated_is_trimmed_and_one_past_the_server_is_a_409(alices):
    client, run = alices
    assert upload(client, run, "telemetry", 0, b'{"step": 1}\n{"st').json() == {"offset": 16}
    assert upload(client, run, "telemetry", 0, b'{"step": 1}\n{"step": 2}\n').json() == {
        "offset": 24
    }
    past = upload(client, run, "telemetry", 30, b'{"step": 4}\n')
    assert (past.status_code, past.json()) == (
        409,
        {
            "error": "the server has 24 bytes of this telemetry; send again from offset 24",
            "kind": "telemetry",
            "offset": 24,
        },
    )
    assert upload(client, run, "telemetry", 24, b"").json() == {"offset": 24}
    assert run.telemetry_path.read_bytes() == b'{"step": 1}\n{"step": 2}\n'
    assert client.get(f"/api/runs/{run.name}/files/").json() == {"telemetry": 24, "log": 0}


@pytest.mark.parametrize("offset", ["-1", "abc", "1e3", " 5", "99999999999999999999", "", "5.0"])
def test_an_offset_that_is_not_a_whole_number_of_bytes_is_a_400(alices, offset):
    client, run = alices
    answer = client.post(
        f"/api/runs/{run.name}/files/log/?offset={offset}", b"x", content_type="text/plain"
    )

    assert answer.status_code == 400
    assert answer.json()["error"].endswith("which is not a whole number of bytes")
    assert run.log_path.read_bytes() == b""


def test_a_chunk_over_the_limit_is_a_413_and_nothing_of_it_is_kept(alices):
    client, run = alices
    big = b"x" * (receiving.MAX_CHUNK + 1)

    answer = upload(client, run, "telemetry", 0, big)

    assert answer.status_code == 413
    assert answer.json() == {
        "error": "a chunk is at most 1,048,576 bytes and this one is 1,048,577; send the file in "
        "smaller pieces, each naming the offset it starts at",
        "limit": 1048576,
    }
    assert run.telemetry_path.read_bytes() == b""
    assert upload(client, run, "telemetry", 0, big[:-1]).json() == {"offset": receiving.MAX_CHUNK}


def test_only_the_runs_maker_uploads_a_teammate_reads_and_an_outsider_sees_nothing(
    alices, bob, eve, token_of
):
    _, run = alices
    teammate, outsider = token_of(bob), token_of(eve)
    for client, status in ((teammate, 403), (outsider, 404), (Client(), 403)):
        for path, body in (
            ("files/telemetry/?offset=0", b"{}\n"),
            ("heartbeat/", {"host": "h", "pid": 1}),
            ("end/", {"exit_code": 0, "telemetry": 0, "log": 0}),
        ):
            kind = "application/octet-stream" if isinstance(body, bytes) else "application/json"
            answer = client.post(f"/api/runs/{run.name}/{path}", body, content_type=kind)
            assert answer.status_code == status, (path, status)
    said = teammate.post(f"/api/runs/{run.name}/end/", {}, content_type="application/json")
    assert said.json() == {"error": NOT_YOURS.format(run=run.name, creator="alice")}
    assert teammate.get(f"/api/runs/{run.name}/").status_code == 200
    assert run.telemetry_path.read_bytes() == b""
    run.refresh_from_db()
    assert (run.status, run.supervisor_host) == ("running", "gpu-7")


def test_nothing_is_uploaded_to_a_run_that_runs_on_the_server(shown, alice, token_of):
    shown.creator = alice
    shown.save()
    answer = upload(token_of(alice), shown, "telemetry", 0, b"{}\n")

    assert (answer.status_code, answer.json()) == (
        403,
        {"error": NOT_REMOTE.format(run=shown.name)},
    )


def test_a_run_whose_files_another_home_holds_is_a_421_for_every_upload_beat_and_end(alices):
    client, run = alices
    Run.objects.filter(pk=run.pk).update(home="another-home-of-this-database")
    said = {"error": NOT_HELD.format(run=run.name)}

    for answer in (
        client.get(f"/api/runs/{run.name}/files/"),
        upload(client, run, "telemetry", 0, b'{"step": 1}\n'),
        client.post(
            f"/api/runs/{run.name}/heartbeat/", {"host": "h", "pid": 1}, "application/json"
        ),
        end(client, run, 0),
    ):
        assert (answer.status_code, answer.json()) == (421, said)
    assert Run.objects.get().status == "running"


def test_a_run_ends_only_once_every_byte_is_there_and_then_takes_no_more(alices):
    client, run = alices
    upload(client, run, "telemetry", 0, b'{"step": 1}\n')
    upload(client, run, "log", 0, b"hello\n")

    short = end(client, run, 0, telemetry=24, log=6)
    assert (short.status_code, short.json()["kind"], short.json()["offset"]) == (
        409,
        "telemetry",
        12,
    )
    assert Run.objects.get().status == "running"

    assert end(client, run, 0, telemetry=12, log=6).json() == {"status": "succeeded"}
    assert end(client, run, 0, telemetry=12, log=6).status_code == 200  # said again: fine
    assert end(client, run, 1, telemetry=12, log=6).json() == {
        "error": f"{run.name} has already ended with exit code 0"
    }
    late = upload(client, run, "telemetry", 12, b'{"step": 2}\n')
    assert late.json() == {
        "error": f"{run.name} has ended: it takes no more bytes of its telemetry"
    }
    assert upload(client, run, "telemetry", 0, b'{"step": 1}\n').status_code == 200  # a repeat


def test_a_run_whose_files_hold_more_than_4_gb_ends_once_the_server_has_them(alices):
    client, run = alices
    size = 3_000_000_000  # past 32 bits, as a long run's log or telemetry gets
    short = end(client, run, 0, telemetry=0, log=size)
    assert (short.status_code, short.json()) == (
        409,
        {
            "error": "the server has 0 bytes of this log; send again from offset 0",
            "kind": "log",
            "offset": 0,
        },
    )
    os.truncate(run.telemetry_path, size)  # sparse: the sizes are what is judged
    receiving.folder(run).mkdir(exist_ok=True)
    (receiving.folder(run) / "log.json").write_text(json.dumps({"received": size}))

    ended = end(client, run, 0, telemetry=size, log=size)

    assert (ended.status_code, ended.json()) == (200, {"status": "succeeded"})


@pytest.mark.parametrize(
    "body",
    [
        {"exit_code": 2**31, "telemetry": 0, "log": 0},
        {"exit_code": 0, "telemetry": 2**63, "log": 0},
        {"exit_code": 0, "telemetry": 0, "log": -1},
        {"exit_code": 0, "telemetry": 0.5, "log": 0},
    ],
)
def test_an_end_with_an_exit_code_past_32_bits_or_a_size_that_is_not_one_is_a_400(alices, body):
    client, run = alices

    answer = client.post(f"/api/runs/{run.name}/end/", body, content_type="application/json")

    assert (answer.status_code, answer.json()) == (
        400,
        {"error": 'send a JSON object with "exit_code", "telemetry", "log"'},
    )
    assert Run.objects.get().status == "running"


def test_the_log_is_masked_again_on_the_server_even_a_secret_split_across_chunks(alices):
    client, run = alices
    services.secret_put(org="acme", name="HF_TOKEN", value="hf_split_secret")
    from telemetry import client_api

    client_api._maskers.clear()

    upload(client, run, "log", 0, b"token hf_split")
    assert upload(client, run, "log", 14, b"_secret here\n").json() == {"offset": 27}
    upload(client, run, "log", 27, b"ends with hf_spl")

    assert run.log_path.read_bytes() == b"token *** here\nends with "
    assert end(client, run, 0, telemetry=0, log=43).status_code == 200
    assert run.log_path.read_bytes() == b"token *** here\nends with hf_spl"


def test_an_upload_from_its_supervisor_brings_a_lost_run_back_and_reopens_its_telemetry(alices):
    client, run = alices
    Run.objects.filter(pk=run.pk).update(status="lost", telemetry_closed=True, ended=timezone.now())

    upload(client, run, "telemetry", 0, b'{"step": 1}\n', **{"Divergent-Supervisor": "4242@gpu-7"})

    run.refresh_from_db()
    assert (run.status, run.ended, run.telemetry_closed) == ("running", None, False)


def test_an_upload_from_another_process_reopens_a_lost_runs_telemetry_but_leaves_it_lost(alices):
    client, run = alices
    Run.objects.filter(pk=run.pk).update(status="lost", telemetry_closed=True)

    upload(client, run, "telemetry", 0, b'{"step": 1}\n')

    run.refresh_from_db()
    assert (run.status, run.telemetry_closed) == ("lost", False)


def test_a_heartbeat_gives_the_orgs_secrets_as_they_are_now(alices):
    client, run = alices
    services.secret_put(org="acme", name="WANDB_KEY", value="set-while-it-runs")

    beat = client.post(
        f"/api/runs/{run.name}/heartbeat/",
        {"host": "gpu-7", "pid": 4242},
        content_type="application/json",
    )

    assert beat.json() == {"status": "running", "secrets": {"WANDB_KEY": "set-while-it-runs"}}


def test_a_beat_for_an_ended_run_changes_nothing_of_it(alices):
    client, run = alices
    assert end(client, run, 0).json() == {"status": "succeeded"}
    before = Run.objects.get()

    beat = client.post(
        f"/api/runs/{run.name}/heartbeat/",
        {"host": "elsewhere", "pid": 7},
        content_type="application/json",
    )
    repeat = upload(client, run, "telemetry", 0, b"", **{"Divergent-Supervisor": "8@elsewhere"})

    assert (beat.status_code, beat.json()) == (200, {"status": "succeeded", "secrets": {}})
    assert repeat.json() == {"offset": 0}
    after = Run.objects.get()
    assert (after.supervisor_host, after.supervisor_pid, after.heartbeat) == (
        "gpu-7",
        4242,
        before.heartbeat,
    )


# ---- an org's secrets -----------------------------------------------------------------------


def test_a_member_sets_lists_and_deletes_secrets_and_an_outsider_cannot(home, alice, eve, token_of):
    member, outsider = token_of(alice), token_of(eve)
    path = "/api/orgs/acme/secrets/"

    short = member.put(path + "HF_TOKEN/", {"value": "short"}, content_type="application/json")
    assert short.json() == {"error": services.SECRET_TOO_SHORT}
    put = member.put(
        path + "HF_TOKEN/", {"value": "hf_long_enough"}, content_type="application/json"
    )
    assert put.status_code == 204
    assert member.get(path).json() == {"names": ["HF_TOKEN"]}
    for answer in (
        outsider.get(path),
        outsider.put(path + "X_KEY/", {"value": "12345678"}, content_type="application/json"),
        outsider.delete(path + "HF_TOKEN/"),
    ):
        assert answer.json() == {"error": 'you have no org "acme"; yours: other'}
    assert member.delete(path + "HF_TOKEN/").status_code == 204
    assert member.get(path).json() == {"names": []}
