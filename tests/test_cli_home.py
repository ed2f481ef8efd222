"""What `div` reads of its settings and its home, broken as a careless hand breaks them: an empty
or unreadable key file, a home that is a file, a DATABASE_URL left on a GPU machine. Each is one
line naming the file or the variable and what to do, and nothing is made in its place."""

# ruff: noqa: F811  (fixtures imported by name)

from __future__ import annotations

from tests.conftest import div_at
from tests.remote import remote  # noqa: F401  (a fixture)
from tests.test_cli import one_line_error

KEY_ADVICE = (
    "remove it and a new key is made (login links and sessions signed with the old one stop "
    "working), or set SECRET_KEY"
)


def set_up(home) -> None:
    assert div_at(home, "migrate").returncode == 0


def test_an_empty_key_file_is_one_line_and_no_user_is_made(tmp_path):
    set_up(tmp_path)
    (tmp_path / "secret_key").write_text("")

    one_line_error(
        div_at(tmp_path, "user", "add", "bob"),
        1,
        f"div: {tmp_path}/secret_key is empty; {KEY_ADVICE}",
    )
    one_line_error(
        div_at(tmp_path, "user", "link", "bob"),
        1,
        f"div: {tmp_path}/secret_key is empty; {KEY_ADVICE}",
    )
    assert (tmp_path / "secret_key").read_text() == ""  # never made again over it
    (tmp_path / "secret_key").unlink()
    assert div_at(tmp_path, "user", "add", "bob").returncode == 0  # bob was not made before


def test_a_key_file_that_is_a_folder_is_one_line(tmp_path):
    set_up(tmp_path)
    (tmp_path / "secret_key").mkdir()

    one_line_error(
        div_at(tmp_path, "serve", "--port", "0"),
        1,
        f"div: cannot read {tmp_path}/secret_key (is a directory); {KEY_ADVICE}",
    )


def test_an_empty_home_id_refuses_a_run_in_one_line_and_makes_none(tmp_path):
    set_up(tmp_path)
    (tmp_path / "home-id").write_text("")
    project = tmp_path / "project"
    project.mkdir()

    one_line_error(
        div_at(tmp_path, "run", str(project), "--", "true"),
        1,
        f"div: {tmp_path}/home-id is empty; restore it, or remove it and a new id is made (the "
        "runs made here before then belong to no home: their telemetry is no longer read)",
    )
    (tmp_path / "home-id").unlink()
    assert div_at(tmp_path, "telemetry").stdout == "name  status  points  keys  created\n"
    assert not list((tmp_path / "runs").glob("*"))


def test_a_home_that_is_a_file_or_inside_one_is_one_line_and_left_as_it_was(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("notes\n")

    for home in (afile, afile / "home"):
        one_line_error(
            div_at(home, "user", "add", "x"),
            1,
            f"div: DIVERGENT_HOME='{home}' cannot be a folder: {afile} is a file; "
            "point DIVERGENT_HOME at a folder (it is made if missing)",
        )
    assert afile.read_text() == "notes\n"


def test_a_home_that_cannot_be_made_is_one_line(tmp_path):
    home = "/proc/no-such-process/home"  # no one may make folders in /proc, root included

    one_line_error(
        div_at(home, "user", "add", "x"),
        1,
        f"div: cannot make {home} (no such file or directory); "
        "point DIVERGENT_HOME at a folder this user can write",
    )


def test_div_login_to_a_malformed_address_is_one_line(tmp_path):
    one_line_error(
        div_at(tmp_path, "login", "http://[::1", input="div_token\n"),
        1,
        "div: URL='http://[::1' is not an http:// or https:// address, like https://div.example.com",
    )


def test_a_gpu_machine_never_reads_a_database_url_left_in_its_environment(remote):
    gpu = remote.machine("alice", DATABASE_URL="garbage")

    listed = gpu("telemetry")

    assert (listed.returncode, listed.stdout, listed.stderr) == (
        0,
        "name  status  points  keys  created\n",
        "",
    )
    server_side = gpu("telemetry", DIVERGENT_TOKEN="")  # no token: this machine's own database
    one_line_error(
        server_side,
        1,
        "div: DATABASE_URL is not a database URL; write it like postgres://user@host:5432/db",
    )


def test_a_lock_that_cannot_be_written_is_one_line_for_ingest_and_serve(tmp_path):
    """A home this user cannot write (read-only, another user's) stops div ingest and div serve
    at their lock, in one line naming it."""
    set_up(tmp_path)
    (tmp_path / "ingester.lock").mkdir()  # open() fails on it as on a read-only home
    line = (
        f"div: cannot write {tmp_path}/ingester.lock (is a directory); "
        "point DIVERGENT_HOME at a folder this user can write"
    )

    one_line_error(div_at(tmp_path, "ingest", "--once"), 1, line)
    one_line_error(div_at(tmp_path, "serve", "--port", "0"), 1, line)
