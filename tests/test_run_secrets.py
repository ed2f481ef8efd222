"""A run's secrets, through real processes: its command line shown masked but run whole, its log
masked as output arrives (split writes, progress bars, multi-line secrets, secrets set while it
runs), and its telemetry's flattened keys."""

# ruff: noqa: F811  (fixtures imported by name, as in test_browser.py)

from __future__ import annotations

import html
import json
import sys
import textwrap
import time

import pytest
from django.db import connection
from django.test import Client

from telemetry import encryption, services
from telemetry.layout import parse_layout
from telemetry.models import Run, Secret
from telemetry.runner import NO_COMMAND
from tests.conftest import wait_for
from tests.remote import remote  # noqa: F401  (a fixture)

pytest_plugins = ["tests.personas"]

SECRET = "hf_Zq8s3cr3tV4lu3x"
PEM = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACDx2bBBkCvpMhZ0Qw9BQ1Wn5VYp3YG9n2p1sY5sWJ+PQwAAAJgzV+xmM1fs\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)


@pytest.fixture(autouse=True)
def no_key_in_environment(monkeypatch):
    monkeypatch.delenv(encryption.KEY_ENV, raising=False)


@pytest.fixture
def project(tmp_path):
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


def script(project, name: str, text: str) -> str:
    (project / name).write_text(textwrap.dedent(text))
    return name


def log_of(run: Run) -> str:
    return run.log_path.read_bytes().decode("utf-8", errors="replace")


def ended(run: Run) -> bool:
    run.refresh_from_db()
    return run.telemetry_closed


# Waiting for a file the test makes, with a deadline, so a failing test cannot hang.
WAIT_FOR = """
import os, time
def wait_for(name):
    deadline = time.monotonic() + 60
    while not os.path.exists(name) and time.monotonic() < deadline:
        time.sleep(0.02)
"""


# The command line


@pytest.fixture
def check(div, project) -> str:
    """w.py, which says whether its last argument is the secret HF_TOKEN, whole."""
    assert div("secrets", "set", "default", "HF_TOKEN", input=SECRET).returncode == 0
    return script(
        project,
        "w.py",
        """
        import os, sys
        print("argv whole:", sys.argv[-1] == os.environ["HF_TOKEN"])
        """,
    )


def test_a_secret_on_the_command_line_is_shown_masked_and_given_whole(div, project, check):
    launched = div("run", str(project), "--", sys.executable, check, "--token=x", SECRET)

    assert launched.returncode == 0, launched.stderr
    assert "argv whole: True" in launched.stdout
    run = Run.objects.get()
    assert run.command == [sys.executable, check, "--token=x", "***"]
    alice = services.user_create(username="alice", orgs=["default"], staff=True)
    client = Client()
    client.force_login(alice)
    for page in [f"/api/runs/{run.name}/", "/api/runs/", f"/runs/{run.name}/"]:
        shown = client.get(page).content.decode()
        assert SECRET not in shown and "***" in shown, page
    admin = client.get(f"/admin/telemetry/run/{run.pk}/change/").content.decode()
    assert SECRET not in admin and "***" in admin


def test_a_detached_run_is_given_its_command_whole_without_storing_it(div, project, check):
    launched = div("run", str(project), "--detach", "--", sys.executable, check, SECRET)

    assert launched.returncode == 0, launched.stderr
    run = Run.objects.get()
    wait_for(lambda: ended(run), what="the detached run")
    assert (run.status, run.command[-1]) == ("succeeded", "***")
    assert "argv whole: True" in log_of(run)


def test_the_supervisor_without_a_command_on_stdin_is_one_line(div, project):
    run = services.run_create(org=services.org_get_or_create(), command=["true"])

    supervised = div("supervise", run.name, input="")

    assert (supervised.returncode, supervised.stderr) == (1, f"div: {NO_COMMAND}\n")


# The log, as output arrives


def launch_paused(div, project, body: str) -> Run:
    """A detached run of a script that writes, waits for the file "go", and writes again."""
    script(project, "paused.py", WAIT_FOR + textwrap.dedent(body))
    div("run", str(project), "--detach", "--", sys.executable, "paused.py")
    return Run.objects.get()


def go_on(run: Run) -> None:
    (run.files_path / "go").touch()
    wait_for(lambda: ended(run), what="the run")


def test_a_progress_bar_reaches_the_log_before_its_newline(div, project):
    run = launch_paused(
        div,
        project,
        """
        import sys
        sys.stdout.write("\\r 50%|#####     |")
        sys.stdout.flush()
        wait_for("go")
        sys.stdout.write("\\r100%|##########|\\n")
        """,
    )

    wait_for(lambda: "50%|#####" in log_of(run), timeout=10, what="the progress bar in the log")

    go_on(run)
    assert log_of(run) == "\r 50%|#####     |\r100%|##########|\n"


def test_a_secret_split_across_two_writes_is_masked_and_the_rest_goes_out_at_once(div, project):
    assert div("secrets", "set", "default", "HF_TOKEN", input=SECRET).returncode == 0
    run = launch_paused(
        div,
        project,
        """
        import sys
        token = os.environ["HF_TOKEN"]
        sys.stdout.write("token: " + token[:7])
        sys.stdout.flush()
        open("half", "w").close()
        wait_for("go")
        sys.stdout.write(token[7:] + " (ok)\\n")
        """,
    )

    wait_for(lambda: (run.files_path / "half").exists(), what="the first half")
    wait_for(lambda: "token: " in log_of(run), timeout=10, what="what came before it")
    assert SECRET[:7] not in log_of(run)

    go_on(run)
    assert log_of(run) == "token: *** (ok)\n"


def test_each_line_of_a_multi_line_secret_is_masked_in_the_log(div, project):
    assert div("secrets", "set", "default", "SSH_KEY", input=PEM).returncode == 0
    show = script(
        project,
        "show.py",
        """
        import os
        for line in os.environ["SSH_KEY"].splitlines():
            print("key>", line, flush=True)
        print(os.environ["SSH_KEY"], flush=True)
        """,
    )

    launched = div("run", str(project), "--", sys.executable, show)

    assert launched.returncode == 0, launched.stderr
    log = log_of(Run.objects.get())
    assert log == "key> ***\nkey> ***\nkey> ***\nkey> ***\n***\n"


def test_a_secret_set_while_a_run_goes_on_is_masked_in_its_log_within_5_seconds(div, project):
    token = "late-" + SECRET
    (project / "token.txt").write_text(token)
    chatty = script(
        project,
        "chatty.py",
        """
        import os, time
        deadline = time.monotonic() + 60
        while not os.path.exists("stop") and time.monotonic() < deadline:
            print("token:", open("token.txt").read(), flush=True)
            time.sleep(0.05)
        """,
    )
    div("run", str(project), "--detach", "--", sys.executable, chatty)
    run = Run.objects.get()
    wait_for(lambda: f"token: {token}" in log_of(run), what="the token printed unmasked")

    services.secret_set(org=run.org, name="LATE_TOKEN", value=token)
    set_at = time.monotonic()
    wait_for(lambda: "token: ***" in log_of(run), timeout=10, what="the token masked")
    masked_after = time.monotonic() - set_at

    (run.files_path / "stop").touch()
    wait_for(lambda: ended(run), what="the run")
    after = log_of(run).split("token: ***", 1)[1]
    assert token not in after, "once masked, the token never shows again"
    assert masked_after < 6.0, f"masked {masked_after:.1f} s after it was set"


# Secrets too short to mask, stored before the rule


def test_a_short_secret_stored_before_the_rule_is_not_masked_and_the_log_says_so(div, project):
    org = services.org_get_or_create()
    Secret.objects.create(org=org, name="SHORT", sealed=encryption.seal("lo"))
    loss = script(
        project,
        "loss.py",
        """
        import json, os
        print("loss 0.5", flush=True)
        with open(os.environ["DIVERGENT_TELEMETRY_PATH"], "a") as f:
            f.write(json.dumps({"step": 1, "loss": 0.5}) + "\\n")
        """,
    )

    launched = div("run", str(project), "--", sys.executable, loss)

    assert launched.returncode == 0, launched.stderr
    run = Run.objects.get()
    assert log_of(run) == (
        "div: the secret SHORT is shorter than 8 characters and is not masked; "
        "div secrets set default SHORT gives it a longer value\n"
        "loss 0.5\n"
    )
    assert list(run.keys.order_by("order").values_list("name", flat=True)) == ["step", "loss"]


# Telemetry


def test_a_secret_split_across_nested_keys_is_not_stored_as_a_key(make_run, acme):
    services.secret_set(org=acme, name="TOKEN", value="tokenpart-one.tokenpart-two")
    telemetry = make_run()

    telemetry.write({"tokenpart-one": {"tokenpart-two": 4}, "step": 1, "loss": 0.5})
    telemetry.ingest()

    assert list(telemetry.run.keys.order_by("order").values_list("name", flat=True)) == [
        "step",
        "loss",
    ]
    assert dict(telemetry.run.drops.values_list("reason", "count")) == {"secret_key": 1}


SECRET_KEY_NOTICE = "telemetry: left out {} that {} a secret's value; keep secrets out of key names"


def test_a_key_that_holds_a_secret_is_counted_and_said_as_such_wherever_drops_are(div, project):
    assert (
        div("secrets", "set", "default", "TOKEN", input="tokenpart-one.tokenpart-two").returncode
        == 0
    )
    write = script(
        project,
        "write.py",
        """
        import json, os
        with open(os.environ["DIVERGENT_TELEMETRY_PATH"], "a") as f:
            for line in [
                {"tokenpart-one": {"tokenpart-two": 4}, "step": 1},
                {"tokenpart-one.tokenpart-two": 5, "train/loss": 1, "step": 2},
            ]:
                print(json.dumps(line), file=f)
        """,
    )

    launched = div("run", str(project), "--", sys.executable, write)

    assert launched.returncode == 0, launched.stderr
    run = Run.objects.get()
    shown = div("telemetry", run.name)
    assert shown.stdout == (
        "key   count  last     min      max\nstep  2      2        1        2\n"
    )
    assert shown.stderr == (
        "telemetry: left out a key that is not letters, digits, _ and - between dots; "
        "write train.loss, not train/loss\n" + SECRET_KEY_NOTICE.format("2 keys", "hold") + "\n"
    )
    log = div("log", run.name).stdout
    assert log.count(SECRET_KEY_NOTICE.format("a key", "holds") + "\n") == 1
    alice = services.user_create(username="alice", orgs=["default"])
    client = Client()
    client.force_login(alice)
    assert client.get(f"/api/runs/{run.name}/").json()["drops"][-1] == {
        "reason": "secret_key",
        "count": 2,
        "notice": SECRET_KEY_NOTICE.format("2 keys", "hold"),
    }
    page = html.unescape(client.get(f"/runs/{run.name}/").content.decode())
    assert SECRET_KEY_NOTICE.format("2 keys", "hold") in page


# The layout

LAYOUT = f"""# the hub's token is {SECRET}
x = "step"

[[panel]]
title = "Loss for {SECRET}"
y = ["{SECRET}", "loss"]

[[stat]]
title = "Best {SECRET}"
y = "loss"
reduce = "min"
"""


def test_a_secret_in_the_layout_is_stored_and_shown_masked_everywhere(make_run, acme):
    services.secret_set(org=acme, name="HF_TOKEN", value=SECRET)
    telemetry = make_run(LAYOUT)
    telemetry.write({"step": 1, "loss": 0.5, SECRET: 3}, {"step": 2, "loss": 0.25})
    telemetry.finish()
    run = telemetry.run
    masked = LAYOUT.replace(SECRET, "***")

    with connection.cursor() as cursor:
        cursor.execute("SELECT origin, source, parsed FROM telemetry_layout")
        stored = [str(column) for column in cursor.fetchone()]
    assert not any(SECRET in column for column in stored)
    assert run.layout.source == masked
    assert run.layout.parsed == json.loads(json.dumps(parse_layout(LAYOUT)).replace(SECRET, "***"))

    alice = services.user_create(username="alice", orgs=["acme"], staff=True)
    client = Client()
    client.force_login(alice)
    detail = client.get(f"/api/runs/{run.name}/").json()
    assert detail["layout"]["source"] == masked
    assert [(p["title"], p["y"]) for p in detail["panels"]] == [("Loss for ***", ["***", "loss"])]
    assert [(s["title"], s["value"]) for s in detail["stats"]] == [("Best ***", 0.25)]
    search = client.get("/api/runs/search/", {"sort": "-stat:Best ***"}).json()
    assert search["cards"] == ["Best ***"]
    assert [(r["name"], r["stats"][0]["title"]) for r in search["runs"]] == [(run.name, "Best ***")]
    page = client.get(f"/runs/{run.name}/").content.decode()
    assert f'<pre class="layout">{html.escape(masked)}</pre>' in page
    for shown in [
        json.dumps(detail),
        json.dumps(search),
        b"".join(client.get(f"/api/runs/{run.name}/panels/").streaming_content).decode(),
        client.get("/api/runs/").content.decode(),
        client.get("/api/compare/", {"runs": run.name}).content.decode(),
        page,
        client.get(f"/admin/telemetry/run/{run.pk}/change/").content.decode(),
    ]:
        assert SECRET not in shown and "***" in shown


def test_the_run_reads_its_shipped_layout_whole_while_the_stored_one_is_masked(div, project):
    assert div("secrets", "set", "default", "HF_TOKEN", input=SECRET).returncode == 0
    (project / "telemetry.toml").write_text(LAYOUT)
    check = script(
        project,
        "w.py",
        """
        import os
        print("layout whole:", os.environ["HF_TOKEN"] in open("telemetry.toml").read())
        """,
    )

    launched = div("run", str(project), "--", sys.executable, check)

    assert launched.returncode == 0, launched.stderr
    assert "layout whole: True" in launched.stdout
    assert Run.objects.get().layout.source == LAYOUT.replace(SECRET, "***")


# The environment

# div's own settings, as a server and a GPU machine have them, and two of the command's own.
SERVERS = {
    "DIVERGENT_SECRETS_KEY": "0n8-8gkwDyXCvETZd8ttGHJhvgFOq5rDs4ZlyU9Cz0A=",
    "ALLOWED_HOSTS": "div.example.com",
    "DIVERGENT_DB_TIMEOUT": "30",
    "MINE": "kept",
}
NAMES = """
import os
OWN = [
    "SECRET_KEY", "DATABASE_URL", "REDIS_URL", "ALLOWED_HOSTS", "DJANGO_SETTINGS_MODULE",
    "DIVERGENT_SECRETS_KEY", "DIVERGENT_HOME", "DIVERGENT_DB_TIMEOUT", "DIVERGENT_TOKEN",
    "DIVERGENT_URL",
]
print("div's:", sorted(name for name in OWN if name in os.environ))
print("given:", sorted(n for n in os.environ if n.startswith("DIVERGENT_") and n not in OWN))
print("the run's:", os.environ.get("HF_TOKEN") == "hf_Zq8s3cr3tV4lu3x", os.environ.get("MINE"))
"""
GIVEN = "div's: []\ngiven: ['DIVERGENT_RUN', 'DIVERGENT_TELEMETRY_PATH']\nthe run's: True kept\n"


def test_a_runs_command_is_given_none_of_divs_own_settings(div, project):
    assert div.env["DATABASE_URL"] and div.env["SECRET_KEY"]
    for args, given in ((["secrets", "set", "default", "HF_TOKEN"], SECRET), (["run"], None)):
        if given is None:
            args = ["run", str(project), "--", sys.executable, script(project, "n.py", NAMES)]
        done = div(*args, input=given, **SERVERS)
        assert done.returncode == 0, done.stderr

    run = Run.objects.get()
    assert log_of(run) == GIVEN
    assert done.stdout == f"{run.name}\n{GIVEN}"


def test_a_gpu_machines_command_is_given_neither_its_token_nor_divs_settings(remote, project):
    services.secret_put(org="acme", name="HF_TOKEN", value=SECRET)
    gpu = remote.machine("alice", REDIS_URL="redis://127.0.0.1:6379/15", **SERVERS)
    assert gpu.env["DIVERGENT_TOKEN"] and gpu.env["DIVERGENT_URL"]

    made = gpu("run", str(project), "--", sys.executable, script(project, "n.py", NAMES))

    assert made.returncode == 0, made.stderr
    assert made.stdout.partition("\n")[2] == GIVEN


def test_a_secret_whose_name_no_environment_can_carry_ends_the_run_with_127_in_one_line(
    div, project
):
    # As the admin stored one before it asked the rule `div secrets set` asks.
    services.secret_set(org=services.org_get_or_create(), name="A=B", value=SECRET)

    launched = div("run", str(project), "--", sys.executable, "w.py", timeout=30)

    said = f"div: cannot start {sys.executable}: A=B cannot be an environment variable; "
    said += "use letters, digits and _, like HF_TOKEN\n"
    assert launched.returncode == 127, launched.stderr
    run = Run.objects.get()
    assert launched.stdout == f"{run.name}\n{said}"
    assert launched.stderr == ""
    assert log_of(run) == said
    assert (run.status, run.exit_code) == ("failed", 127)
