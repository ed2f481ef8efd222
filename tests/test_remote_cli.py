"""`div` on a machine with a token works against the server's API, with no database of its
own: the same training script run locally and remotely prints the same bytes in every form."""

# ruff: noqa: F811  (fixtures imported by name, as in test_browser.py)

from __future__ import annotations

import os
import re
import sqlite3
import stat
import sys

import pytest

from telemetry import services
from telemetry.models import Org, Run
from tests.browser import serve, stop
from tests.elsewhere import Impostor, Listener
from tests.remote import (  # noqa: F401  (fixtures)
    SECRET,
    Machine,
    closed,
    nowhere,
    project,
    remote,
    the_run,
)

FORMS = [
    [],
    ["loss", "eval.loss"],
    ["loss", "--x", "epoch"],
    ["--csv"],
    ["loss", "--csv"],
    ["--json"],
    ["loss", "--json"],
    ["loss", "-f"],
    ["--json", "-f"],
    ["acc"],
    ["los"],
]


def test_a_run_made_remotely_prints_what_the_same_run_made_locally_prints(div, remote, tmp_path):
    services.secret_put(org="acme", name="HF_TOKEN", value=SECRET)
    folder = project(tmp_path)
    server, gpu = Machine(tmp_path, div.env), remote.machine("alice")
    command = ["--org", "acme", "--", sys.executable, "train.py"]

    local, made = server.raw("run", str(folder), *command), gpu.raw("run", str(folder), *command)

    assert (local.returncode, made.returncode) == (3, 3), made.stderr
    here, there = local.stdout.split()[0], made.stdout.split()[0]
    # Attached, a remote div run prints the log as its command writes it; what the server's
    # ingester says of the telemetry (a line dropped) joins the log there, as div log shows.
    notes = re.compile(rb"^telemetry: .*\n", re.MULTILINE)
    assert made.stdout.replace(there, here) == notes.sub(b"", local.stdout)
    assert made.stderr == b""
    assert SECRET.encode() not in made.stdout and b"starting with ***" in made.stdout
    here, there = here.decode(), there.decode()
    closed(here), closed(there)
    for form in FORMS:
        read_here, read_there = (
            server.raw("telemetry", here, *form),
            gpu.raw("telemetry", there, *form),
        )
        assert read_there.stdout == read_here.stdout, form
        assert read_there.stderr == read_here.stderr.replace(here.encode(), there.encode()), form
        assert read_there.returncode == read_here.returncode, form
    for follow in ([], ["-f"]):
        log_here, log_there = server.raw("log", here, *follow), gpu.raw("log", there, *follow)
        assert (
            log_there.stdout == log_here.stdout == (tmp_path / "runs" / here / "log").read_bytes()
        )
        assert (log_there.stderr, log_there.returncode) == (b"", 0)
    assert gpu.raw("telemetry").stdout == server.raw("telemetry").stdout  # alice sees both
    assert gpu.raw("secrets", "list", "acme").stdout == b"HF_TOKEN\n"
    run = the_run(there)
    assert (run.remote, run.creator.username, run.exit_code) == (True, "alice", 3)
    assert run.command == [sys.executable, "train.py"]


@pytest.mark.parametrize("where", ["telemetry.toml", "--telemetry"])
def test_a_layout_the_server_refuses_prints_the_specs_line_and_makes_nothing(
    remote, tmp_path, where
):
    bad = 'x = "step"\n[[panel]]\ny = "loss"\n\n[[panel]]\ny = "loss"\nscael = "log"\n'
    folder = project(tmp_path, layout=bad if where == "telemetry.toml" else None)
    named = []
    if where == "--telemetry":
        (tmp_path / "other.toml").write_text(bad)
        named = ["--telemetry", str(tmp_path / "other.toml")]
    gpu = remote.machine("alice")

    refused = gpu("run", str(folder), *named, "--org", "acme", "--", sys.executable, "train.py")

    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == (
        'div: the API refused the run: telemetry [[panel]] 2 has "scael", which is not one of '
        "title, x, y, scale, min, max, rule, wide\n"
    )
    assert not Run.objects.exists()
    assert not list(gpu.home.glob("runs/*"))  # nor on this machine, partial or whole


def test_server_commands_on_a_client_say_where_they_work_in_one_line(remote):
    gpu = remote.machine("alice")
    for command in (["serve"], ["ingest", "--once"], ["user", "add", "zed"], ["migrate"]):
        said = gpu(*command)
        assert said.returncode == 1, command
        assert said.stderr.count("\n") == 1 and "Traceback" not in said.stderr, command
        assert "works where the database is" in said.stderr, command
        assert remote.url in said.stderr, command


def test_div_login_checks_the_token_then_keeps_it_for_this_user_alone(remote):
    gpu = remote.machine("alice")
    bare = {"DIVERGENT_TOKEN": None, "DIVERGENT_URL": None}
    env = {k: v for k, v in gpu.env.items() if k not in bare}
    gpu.env = env
    kept = gpu.home / "config" / "divergent" / "config.toml"

    wrong = gpu("login", remote.url, input="div_not-a-token\n")
    assert wrong.returncode == 1 and wrong.stderr.startswith("div: the server does not know")
    assert not kept.exists()

    logged = gpu("login", remote.url + "/", input=remote.tokens["alice"] + "\n")
    assert logged.returncode == 0, logged.stderr
    assert logged.stdout == f"Logged in to {remote.url} as alice (orgs: acme); kept in {kept}\n"
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o600
    assert remote.tokens["alice"] in kept.read_text()
    assert gpu("telemetry").returncode == 0  # a client now: its DATABASE_URL is never used
    local = gpu("telemetry", DIVERGENT_TOKEN="")  # set to nothing: this machine's own database
    assert local.stderr.startswith("div: connection failed") and local.stderr.count("\n") == 1


def test_a_token_kept_by_div_login_goes_only_to_the_server_it_was_kept_for(remote):
    gpu = remote.machine("alice")
    gpu.env = {k: v for k, v in gpu.env.items() if k not in ("DIVERGENT_TOKEN", "DIVERGENT_URL")}
    assert gpu("login", remote.url, input=remote.tokens["alice"] + "\n").returncode == 0
    other = Listener()  # another server, which must never see alice's token

    elsewhere = gpu("telemetry", DIVERGENT_URL=other.url)
    same = gpu("telemetry", DIVERGENT_URL=remote.url + "/")

    assert (elsewhere.returncode, elsewhere.stdout) == (1, "")
    assert elsewhere.stderr == (
        f"div: there is no token for {other.url} here: div login kept one for {remote.url} "
        f"only; div login {other.url} gives one, or DIVERGENT_TOKEN= uses this machine's own "
        "database\n"
    )
    assert other.heard() == b""
    assert (same.returncode, same.stderr) == (0, "")


@pytest.mark.parametrize(
    "env, said",
    [
        (
            {"DIVERGENT_URL": "ftp://x"},
            "div: DIVERGENT_URL='ftp://x' is not an http:// or https://",
        ),
        ({"DIVERGENT_URL": "http://127.0.0.1:9"}, "div: cannot reach the server at"),
        ({"DIVERGENT_URL": "http://no-such-host.invalid"}, "div: cannot reach the server at"),
        ({"DIVERGENT_TOKEN": "div_unknown"}, "div: the server does not know this token"),
        ({"DIVERGENT_TOKEN": "two words"}, "div: the Authorization header is not Bearer"),
    ],
)
def test_each_way_of_not_reaching_the_server_is_one_line(remote, env, said):
    done = remote.machine("alice", **env)("telemetry")

    assert done.returncode == 1
    assert done.stderr.startswith(said) and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["telemetry"],
        ["telemetry", "run-1"],
        ["telemetry", "run-1", "loss"],
        ["log", "run-1"],
        ["secrets", "list", "acme"],
        ["token", "list"],
        ["run", "PROJECT", "--", "true"],
        ["login", "URL"],
    ],
    ids=" ".join,
)
def test_an_address_that_answers_but_is_not_a_div_serve_is_one_line(div, tmp_path, args):
    other = Impostor()
    gpu = Machine(
        tmp_path,
        {**div.env, "DIVERGENT_HOME": str(tmp_path), "DATABASE_URL": nowhere()}
        | {"DIVERGENT_URL": other.url, "DIVERGENT_TOKEN": "div_some-token"}
        | {"XDG_CONFIG_HOME": str(tmp_path / "config")},
    )
    named = {"PROJECT": str(project(tmp_path)), "URL": other.url}
    try:
        said = gpu(*[named.get(word, word) for word in args], input="div_some-token\n")
    finally:
        other.stop()

    where = "the address given" if args[0] == "login" else "DIVERGENT_URL"
    assert (said.returncode, said.stdout) == (1, "")
    assert said.stderr == (
        f"div: {other.url} answered as something other than a div serve; check {where}\n"
    )
    assert not list(tmp_path.glob("runs/*")) and not (tmp_path / "config").exists()


def test_a_server_that_fails_is_one_line_saying_what_to_do(div, tmp_path):
    """A server with a database of its own, which loses a table: its 500 is one line."""
    home = tmp_path / "server"
    env = {**div.env, "DIVERGENT_HOME": str(home), "DATABASE_URL": f"sqlite:///{home}/db.sqlite3"}
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    home.mkdir()
    assert Machine(home, env)("user", "add", "alice").returncode == 0
    token = Machine(home, env)("token", "create", "--user", "alice").stdout.strip()
    served = serve(env, tmp_path / "serve.out")
    try:
        with sqlite3.connect(home / "db.sqlite3") as db:
            db.execute("ALTER TABLE telemetry_run RENAME TO telemetry_run_away")
        gpu = Machine(
            tmp_path / "gpu",
            {**env, "DIVERGENT_HOME": str(tmp_path / "gpu"), "DATABASE_URL": nowhere()}
            | {"DIVERGENT_URL": served.url, "DIVERGENT_TOKEN": token},
        )
        failed = gpu("telemetry")
    finally:
        stop(served.process)

    assert failed.returncode == 1
    assert failed.stderr == (
        f"div: the server at {served.url} failed (500 Internal Server Error); try again, or ask "
        "its admin to read its log\n"
    )


def test_tokens_and_secrets_from_a_gpu_machine_are_its_users_own(remote):
    gpu = remote.machine("alice")

    made = gpu("token", "create", "--name", "laptop")
    assert made.returncode == 0 and made.stdout.startswith("div_")
    listed = gpu("token", "list").stdout.splitlines()
    assert [line.split()[0] for line in listed] == ["name", "laptop", "token-1"]
    assert gpu("token", "create", "--user", "bob").stderr == (
        "div: --user works on the server; here, the tokens are those of the token's own user\n"
    )
    assert gpu("token", "revoke", "laptop").returncode == 0
    assert gpu("telemetry", DIVERGENT_TOKEN=made.stdout.strip()).returncode == 1

    assert gpu("secrets", "set", "acme", "HF_TOKEN", input="hf_from_the_gpu\n").returncode == 0
    acme = Org.objects.get(name="acme")
    assert services.secrets_of(acme.pk) == {"HF_TOKEN": "hf_from_the_gpu"}
    theirs = gpu("secrets", "list", "other")
    assert (theirs.returncode, theirs.stderr) == (1, 'div: you have no org "other"; yours: acme\n')
    assert gpu("secrets", "delete", "acme", "HF_TOKEN").returncode == 0
    assert gpu("secrets", "list", "acme").stdout == ""


@pytest.mark.parametrize(
    "args, given",
    [
        (["list", "nosuch"], None),
        (["set", "nosuch", "HF_TOKEN"], "hf_long_enough_value"),
        (["delete", "nosuch", "HF_TOKEN"], None),
    ],
    ids=lambda x: " ".join(x) if isinstance(x, list) else "",
)
def test_an_org_that_does_not_exist_is_refused_alike_on_the_server_and_remotely(
    div, remote, tmp_path, args, given
):
    services.org_add(name="other", members=["alice"])  # in every org: "yours" names them all
    server, gpu = Machine(tmp_path, div.env), remote.machine("alice")

    here = server("secrets", *args, input=given)
    there = gpu("secrets", *args, input=given)

    refused = (1, "", 'div: you have no org "nosuch"; yours: acme, other\n')
    assert (here.returncode, here.stdout, here.stderr) == refused
    assert (there.returncode, there.stdout, there.stderr) == refused
    assert not Org.objects.filter(name="nosuch").exists()


def test_the_servers_div_secrets_works_on_an_org_that_exists_and_on_default(div):
    assert div("org", "add", "acme").returncode == 0
    assert div("secrets", "set", "acme", "HF_TOKEN", input="hf_long_enough").returncode == 0
    # default, where a run without --org goes, is there before anything is made in it
    assert div("secrets", "set", "default", "HF_TOKEN", input="hf_long_enough").returncode == 0

    assert div("secrets", "list", "acme").stdout == "HF_TOKEN\n"
    assert div("secrets", "list", "default").stdout == "HF_TOKEN\n"
    assert sorted(Org.objects.values_list("name", flat=True)) == ["acme", "default"]


def test_div_sync_without_a_token_says_how_to_get_one(div):
    said = div("sync")

    assert (said.returncode, said.stderr) == (
        1,
        "div: div sync uploads runs made from this machine to a server, and there is no token "
        "here: div login URL sets one\n",
    )
