"""The `div` command line as a user meets it: click's help, one-line errors with the right exit
codes, names that are slugs, and a closed stdout that stops only the printing."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import partial

import pytest

from telemetry import services
from telemetry.models import Org, Run
from tests.conftest import ROOT, div_at

COMMANDS = [
    "ingest",
    "log",
    "login",
    "org",
    "run",
    "secrets",
    "serve",
    "sync",
    "telemetry",
    "token",
    "user",
]


def one_line_error(done: subprocess.CompletedProcess, code: int, text: str) -> None:
    """What every error looks like: one line on stderr, that exit code, nothing else."""
    assert (done.returncode, done.stderr) == (code, text + "\n")
    assert "Traceback" not in done.stderr and "Usage:" not in done.stderr


# ---- help ---------------------------------------------------------------------------------


def test_div_help_lists_every_command_with_a_one_line_description(div):
    shown = div("--help")

    assert shown.returncode == 0
    listed = shown.stdout.split("Commands:\n")[1].split("\n\n")[0].splitlines()
    assert [line.split()[0] for line in listed] == COMMANDS
    assert all(len(line.split(None, 1)[1]) > 10 and "..." not in line for line in listed)
    assert div("help").stdout == shown.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_prints_clicks_help(div, command):
    shown = div(command, "--help")

    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"Usage: div {command} ")
    assert "-h, --help" in shown.stdout
    assert "--settings" not in shown.stdout  # Django's own options mean nothing to div


def test_manage_py_runs_the_same_commands(div):
    by_manage = subprocess.run(
        [sys.executable, "manage.py", "telemetry"], env=div.env, cwd=ROOT, capture_output=True
    )

    assert by_manage.returncode == 0
    assert by_manage.stdout == div("telemetry").stdout.encode()


# ---- usage errors: exit 2 -------------------------------------------------------------------


USAGE_ERRORS = [
    (
        ["serve", "--port", "99999"],
        "div serve: --port: 99999 is not a port; use 1 to 65535, or 0 for any free one; "
        "div serve --help lists the options",
    ),
    (
        ["serve", "--port", "-1"],
        "div serve: --port: -1 is not a port; use 1 to 65535, or 0 for any free one; "
        "div serve --help lists the options",
    ),
    (
        ["telemetry", "run-x"],
        'div telemetry: RUN: "run-x" is not a run\'s name; name it like run-7 or 7; '
        "div telemetry --help lists the options",
    ),
    (
        ["telemetry", "--csv"],
        "div telemetry: name a run for --x, --csv, --json or --follow; "
        "div telemetry --help lists the options",
    ),
    (
        ["telemetry", "run-1", "--csv", "--json"],
        "div telemetry: --csv and --json are two forms of the points: name one of them; "
        "div telemetry --help lists the options",
    ),
    (
        ["telemetry", "run-1", "loss", "--x", ""],
        "div telemetry: --x: name the key of the first column, like --x epoch; "
        "div telemetry --help lists the options",
    ),
    (
        ["telemetry", "run-1,,run-2", "loss"],
        'div telemetry: RUN: "" is not a run\'s name, like run-7; '
        "div telemetry --help lists the options",
    ),
    (
        ["telemetry", "run-1,x"],
        'div telemetry: RUN: "x" is not a run\'s name, like run-7; '
        "div telemetry --help lists the options",
    ),
    (
        ["telemetry", ",".join(map(str, range(1, 22)))],
        "div telemetry: RUN: a comparison holds up to 20 runs; "
        "div telemetry --help lists the options",
    ),
    (
        ["secrets", "set", "acme"],
        "div secrets set: NAME is missing; div secrets set --help lists the options",
    ),
    (
        ["secrets"],
        "div secrets: name one of its commands: delete, list, set; "
        "div secrets --help lists the options",
    ),
    (["run"], "div run: DIRECTORY is missing; div run --help lists the options"),
    # A group's command is named whole, whatever click's parser found wrong.
    (
        ["user", "add", "x", "--url"],
        "div user add: --url needs a value; div user add --help lists the options",
    ),
    (
        ["org", "add", "x", "--member"],
        "div org add: --member needs a value; div org add --help lists the options",
    ),
    (
        ["token", "create", "--user"],
        "div token create: --user needs a value; div token create --help lists the options",
    ),
    (
        ["user", "nosuch"],
        'div user: there is no command "nosuch"; name one of its commands: add, link; '
        "div user --help lists the options",
    ),
    (
        ["telemetry", "--x"],
        "div telemetry: --x needs a value; div telemetry --help lists the options",
    ),
    (
        ["run", ".", "--detach=yes"],
        "div run: --detach takes no value; div run --help lists the options",
    ),
    (
        ["run", "", "--", "true"],
        'div run: DIRECTORY: "" names no directory; name the one to ship, like . or ./project; '
        "div run --help lists the options",
    ),
    (
        ["run", "no-such-dir", "--", "true"],
        'div run: DIRECTORY: "no-such-dir" is not a directory; name the one to ship, like . or '
        "./project; div run --help lists the options",
    ),
    (
        ["run", ".", "--telemetry", "", "--", "true"],
        'div run: --telemetry: "" names no file; name the layout file, like ./telemetry.toml; '
        "div run --help lists the options",
    ),
    (
        ["serve", "--host", ""],
        'div serve: --host: "" is not an address of this machine; name one, like 127.0.0.1, or '
        "0.0.0.0 for all of them; div serve --help lists the options",
    ),
]


@pytest.mark.parametrize("args, said", USAGE_ERRORS, ids=[" ".join(a) for a, _ in USAGE_ERRORS])
def test_a_usage_error_is_one_line_and_exits_2(div, args, said):
    one_line_error(div(*args), 2, said)


# ---- refusals: exit 1 -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, kind, like",
    [
        (["user", "add", ""], "a user", "alice"),
        (["user", "add", "al ice"], "a user", "alice"),
        (["org", "add", "bad org"], "an org", "acme"),
        (["org", "add", ""], "an org", "acme"),
        (["secrets", "set", "no/org", "HF_TOKEN"], "an org", "acme"),
    ],
)
def test_an_org_or_a_user_is_named_by_a_slug(div, args, kind, like):
    name = next(a for a in args[2:] if not a.isupper())
    said = f'div: "{name}" cannot name {kind}; use up to 100 letters, digits, _ and -, like {like}'

    one_line_error(div(*args, input="s3cret-value"), 1, said)
    assert not Org.objects.filter(name=name).exists()


def test_a_user_that_exists_is_refused_and_pointed_to_a_new_link(div):
    assert div("user", "add", "alice").returncode == 0

    one_line_error(
        div("user", "add", "alice"),
        1,
        'div: there is already a user "alice"; div user link alice prints a new login link',
    )


def test_org_add_with_a_member_who_does_not_exist_makes_nothing(div):
    one_line_error(
        div("org", "add", "acme", "--member", "bob"),
        1,
        'div: there is no user "bob"; div user add bob makes one',
    )
    assert not Org.objects.filter(name="acme").exists()


def test_org_add_makes_the_org_with_its_members(div):
    div("user", "add", "alice")
    div("user", "add", "bob")

    assert div("org", "add", "acme", "--member", "alice", "--member", "bob").returncode == 0

    assert sorted(Org.objects.get(name="acme").members.values_list("username", flat=True)) == [
        "alice",
        "bob",
    ]


def test_a_fifo_in_the_shipped_directory_is_one_line_not_a_traceback(div, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    os.mkfifo(project / "pipe")

    launched = div("run", str(project), "--", sys.executable, "-c", "1", timeout=30)

    assert launched.returncode == 0
    assert launched.stderr == (
        "ship: skipped pipe, a FIFO: only files, folders and links are shipped\n"
    )
    run = Run.objects.get()
    assert not (run.files_path / "pipe").exists()


def test_a_secret_that_does_not_exist_cannot_be_deleted(div):
    services.org_add(name="acme")
    one_line_error(
        div("secrets", "delete", "acme", "HF_TOKEN"), 1, 'div: org acme has no secret "HF_TOKEN"'
    )


def test_a_secret_needs_a_value_on_stdin_and_a_name_a_variable_can_have(div):
    one_line_error(
        div("secrets", "set", "acme", "HF_TOKEN", input=""),
        1,
        'div: no value on stdin; pipe it in, like: printf %s "$TOKEN" | div secrets set ORG NAME',
    )
    one_line_error(
        div("secrets", "set", "acme", "HF-TOKEN", input="s3cret-value"),
        1,
        "div: HF-TOKEN cannot be an environment variable; use letters, digits and _, like HF_TOKEN",
    )


@pytest.mark.parametrize("locale", ["C.UTF-8", "C"])
def test_a_secret_that_is_not_utf8_text_is_one_line(tmp_path, locale):
    """Bytes that are not UTF-8 (a binary key file piped in) are refused, never a traceback,
    whether stdin decodes them with surrogates or strictly."""
    env = {**os.environ, "DIVERGENT_HOME": str(tmp_path), "LC_ALL": locale}
    env.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "divergent", "secrets", "set", "default", "KEY"],
        input=b"\xff\xfe\xfd\xfc-not-text",
        env=env,
        cwd=ROOT,
        capture_output=True,
    )
    assert (done.returncode, done.stderr.decode()) == (1, f"div: {services.SECRET_NOT_TEXT}\n")


def test_a_secret_with_a_lone_surrogate_is_refused_by_every_path(db):
    """What the API's JSON can carry ("\\udcff") cannot be stored: refused, not a 500."""
    with pytest.raises(services.Refused, match="UTF-8"):
        services.secret_seal(value="\udcff-not-text-value")


# ---- a home with no database yet ------------------------------------------------------------


def test_reading_a_home_that_was_never_set_up_says_what_to_do_and_leaves_nothing(tmp_path):
    fresh = tmp_path / "fresh"

    for args in (["telemetry"], ["telemetry", "run-1"], ["log", "run-1"]):
        one_line_error(
            div_at(fresh, *args),
            1,
            f"div: {fresh} has no database yet; div migrate sets it up "
            "(div run and div serve do too)",
        )
    assert not fresh.exists()


def test_div_migrate_sets_up_a_home_that_does_not_exist_yet(tmp_path):
    div = partial(div_at, tmp_path / "fresh")

    assert div("migrate").returncode == 0
    listed = div("telemetry")
    assert (listed.returncode, listed.stdout) == (0, "name  status  points  keys  created\n")


# ---- settings -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "variable, value, said",
    [
        ("DEBUG", "maybe", "div: DEBUG='maybe' is not a yes or no; set it to 1 or 0"),
        (
            "DATABASE_URL",
            "postgres://u:pw@host:port/db",
            "div: DATABASE_URL is not a database URL; write it like postgres://user@host:5432/db",
        ),
        (
            "DATABASE_URL",
            "mysql://u@host/db",
            "div: DATABASE_URL is not a PostgreSQL or SQLite URL; "
            "write it like postgres://user@host:5432/db",
        ),
        ("TZ", "Mars/Base", "div: TZ='Mars/Base' is not a time zone, like UTC or Europe/Paris"),
        (
            "REDIS_URL",
            "localhost:6379",
            "div: REDIS_URL is not a Redis URL; write it like redis://127.0.0.1:6379/0",
        ),
        (
            "DIVERGENT_URL",
            "localhost:8000",
            "div: DIVERGENT_URL='localhost:8000' is not an http:// or https:// address, "
            "like https://div.example.com",
        ),
        (
            "SECURE_PROXY_SSL_HEADER",
            "X-Forwarded-Proto",
            "div: SECURE_PROXY_SSL_HEADER='X-Forwarded-Proto' is not a header and its value; "
            "set it like X-Forwarded-Proto: https",
        ),
        (
            "DIVERGENT_DB_TIMEOUT",
            "soon",
            "div: DIVERGENT_DB_TIMEOUT='soon' is not a number of seconds; set it like 30",
        ),
        # A float, but no time to wait.
        *(
            (
                "DIVERGENT_DB_TIMEOUT",
                value,
                f"div: DIVERGENT_DB_TIMEOUT='{value}' is not a number of seconds; set it like 30",
            )
            for value in ("nan", "-5", "inf")
        ),
        (
            "DIVERGENT_REMOTE_LOST_AFTER",
            "-1",
            "div: DIVERGENT_REMOTE_LOST_AFTER='-1' is not a number of seconds; set it like 30",
        ),
        (
            "DIVERGENT_URL",
            "http://[::1",
            "div: DIVERGENT_URL='http://[::1' is not an http:// or https:// address, "
            "like https://div.example.com",
        ),
        (
            "REDIS_URL",
            "redis://[::1",
            "div: REDIS_URL is not a Redis URL; write it like redis://127.0.0.1:6379/0",
        ),
        (
            "DIVERGENT_HOME",
            "/dev/null",
            "div: DIVERGENT_HOME='/dev/null' cannot be a folder: /dev/null is a file; "
            "point DIVERGENT_HOME at a folder (it is made if missing)",
        ),
        # Left set by another Django project in the same shell.
        *(
            (
                "DJANGO_SETTINGS_MODULE",
                value,
                f"div: DJANGO_SETTINGS_MODULE='{value}' {what}; "
                "unset it, and div uses its own settings (divergent.settings)",
            )
            for value, what in (
                ("mysite.settings", "names no module that can be imported"),
                ("os.path.nope", "names no module that can be imported"),
                ("json", "names settings that are not div's"),  # a module, but no app of div's
            )
        ),
    ],
)
def test_a_malformed_variable_stops_start_up_with_one_line_naming_it(
    tmp_path, variable, value, said
):
    env = {**os.environ, "DIVERGENT_HOME": str(tmp_path), variable: value}

    done = subprocess.run(
        [sys.executable, "-m", "divergent", "telemetry"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )

    one_line_error(done, 1, said)
    assert "pw" not in done.stderr  # a database URL may carry a password: never shown


# ---- a closed stdout stops only the printing ------------------------------------------------

WRITER = """\
import json, os, sys
with open(os.environ["DIVERGENT_TELEMETRY_PATH"], "a") as f:
    for i in range(1, 10001):
        f.write(json.dumps({"step": i, "loss": 1 / i}) + "\\n")
        if i % 50 == 0:
            print("wrote", i, flush=True)
sys.exit(3)
"""


def test_div_run_piped_into_a_reader_that_stops_early_still_runs_and_stores_everything(
    div, tmp_path
):
    project = tmp_path / "project"
    project.mkdir()
    (project / "writer.py").write_text(WRITER)
    launched = subprocess.Popen(
        [sys.executable, "-m", "divergent", "run", str(project), "--", sys.executable, "writer.py"],
        env=div.env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    name = launched.stdout.readline()  # `| head -1`: the run's name, and the reader is gone
    launched.stdout.close()

    assert launched.wait(timeout=120) == 3  # the command's exit code
    assert name == f"{Run.objects.get().name}\n".encode()
    assert launched.stderr.read() == b""
    run = Run.objects.get()
    assert (run.status, run.exit_code, run.telemetry_closed) == ("failed", 3, True)
    assert run.points == 10_000
    assert "wrote 10000" in run.log_path.read_text()


def test_div_log_piped_into_head_stops_quietly(div, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    script = "for i in range(20000): print('line', i)"
    name = div("run", str(project), "--", sys.executable, "-c", script).stdout.split()[0]

    piped = subprocess.run(
        f"{sys.executable} -m divergent log {name} | head -1",
        shell=True,
        env=div.env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )

    assert (piped.stdout, piped.stderr) == ("line 0\n", "")


def test_div_run_and_div_log_print_the_bytes_as_written(div, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    written = b"\x1b[32mok\x1b[0m\r50%\r100%\n\xff\n"  # colour, a progress bar, not UTF-8
    script = f"import sys; sys.stdout.buffer.write({written!r})"

    def div_bytes(*args: str) -> bytes:
        done = subprocess.run(
            [sys.executable, "-m", "divergent", *args], env=div.env, cwd=ROOT, capture_output=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    launched = div_bytes("run", str(project), "--", sys.executable, "-c", script)
    name = launched.split(b"\n")[0].decode()

    assert launched == f"{name}\n".encode() + written
    assert div_bytes("log", name) == written


# ---- login links name the server ------------------------------------------------------------


def test_user_link_uses_divergent_url_when_it_is_set(div):
    div("user", "add", "alice")
    env = {**div.env, "DIVERGENT_URL": "https://div.example.com/"}

    linked = subprocess.run(
        [sys.executable, "-m", "divergent", "user", "link", "alice"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )

    assert linked.returncode == 0, linked.stderr
    assert linked.stdout.startswith("https://div.example.com/login/")


@pytest.mark.parametrize("url", ["", "ftp://div.example.com", "javascript:alert(1)", "http://a\nb"])
def test_a_link_url_that_is_no_address_is_one_line_as_div_login_says(div, url):
    """--url is held to DIVERGENT_URL's rule: a link printed from it would not open."""
    div("user", "add", "alice")

    one_line_error(
        div("user", "link", "alice", "--url", url),
        1,
        f"div: --url={url!r} is not an http:// or https:// address, like https://div.example.com",
    )
    assert div("user", "link", "alice", "--url", "https://div.example.com/").stdout.startswith(
        "https://div.example.com/login/"
    )


@pytest.mark.parametrize("url", ["http://a\nb", "http://div.example.com/ x", "http://a\tb"])
def test_divergent_url_with_a_control_character_or_space_stops_start_up(tmp_path, url):
    done = div_at(tmp_path, "user", "link", "alice", DIVERGENT_URL=url)

    one_line_error(
        done,
        1,
        f"div: DIVERGENT_URL={url!r} is not an http:// or https:// address, "
        "like https://div.example.com",
    )
