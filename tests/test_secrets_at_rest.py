"""Secret values are stored encrypted, and nothing (a database dump, the admin's query strings,
a lost or different key) gives one away or leaves one unmasked."""

from __future__ import annotations

import base64
import html
import logging
import os
import stat
import subprocess
import sys
import textwrap

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from telemetry import encryption, services
from telemetry.models import Run, Secret
from tests.conftest import ROOT, database_url

pytest_plugins = ["tests.personas"]

SECRET = "hf_Zq8s3cr3tV4lu3x"


@pytest.fixture(autouse=True)
def no_key_in_environment(monkeypatch):
    monkeypatch.delenv(encryption.KEY_ENV, raising=False)


def stored_column() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT sealed FROM {Secret._meta.db_table}")
        return [row[0] for row in cursor.fetchall()]


# At rest


def test_a_secret_is_stored_encrypted_and_given_back_whole(home, db):
    org = services.org_get_or_create(name="acme")
    services.secret_set(org=org, name="HF_TOKEN", value=SECRET)

    [sealed] = stored_column()
    assert SECRET not in sealed
    assert services.secrets_of(org.pk) == {"HF_TOKEN": SECRET}


def test_the_key_file_is_made_once_and_readable_by_its_owner_alone(home, db):
    org = services.org_get_or_create(name="acme")
    services.secret_set(org=org, name="HF_TOKEN", value=SECRET)
    key = (home / encryption.KEY_FILE).read_bytes()

    services.secret_set(org=org, name="WANDB_KEY", value="wandb-" + SECRET)

    path = home / encryption.KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes() == key
    assert [p.name for p in home.iterdir() if p.name.startswith(".secrets")] == []


def test_processes_making_the_key_at_once_all_use_the_same_one(tmp_path):
    """Eight processes store a secret in a new home at the same moment, with a umask that would
    let anyone read what they make: one key is made, 0600, and it reads every value."""
    racer = textwrap.dedent(
        """
        import os, sys, time
        os.umask(0)
        import django
        django.setup()
        from telemetry import encryption
        while not os.path.exists(sys.argv[1]):
            time.sleep(0.001)
        print(encryption.seal(sys.argv[2]))
        """
    )
    go = tmp_path / "go"
    env = {
        **os.environ,
        "DIVERGENT_HOME": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "divergent.settings",
    }
    env.pop(encryption.KEY_ENV, None)
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", racer, str(go), f"value-{n}-{SECRET}"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(8)
    ]
    go.touch()
    tokens = [racer.communicate(timeout=60)[0].strip() for racer in racers]

    key = tmp_path / encryption.KEY_FILE
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    fernet = Fernet(key.read_bytes().strip())
    assert [fernet.decrypt(token.encode()).decode() for token in tokens] == [
        f"value-{n}-{SECRET}" for n in range(8)
    ]


def test_a_database_dump_shows_no_secret_value(div, home, tmp_path):
    """Set, used on a command line, printed, written to telemetry as a value and as a key:
    then the whole database is dumped, as a backup would be."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "w.py").write_text(
        textwrap.dedent(
            """
            import json, os, sys
            token = sys.argv[sys.argv.index("--token") + 1]
            print("token", token)
            with open(os.environ["DIVERGENT_TELEMETRY_PATH"], "a") as f:
                f.write(json.dumps({"step": 1, "note": token, token: 2, "loss": 0.5}) + "\\n")
            """
        )
    )
    assert div("secrets", "set", "default", "HF_TOKEN", input=SECRET).returncode == 0

    launched = div("run", str(project), "--", sys.executable, "w.py", "--token", SECRET)

    assert launched.returncode == 0, launched.stderr
    assert Run.objects.get().points == 1
    dump = dump_database()
    assert "w.py" in dump and "HF_TOKEN" in dump  # the dump is the real thing
    assert SECRET not in dump
    assert base64.b64encode(SECRET.encode()).decode().rstrip("=") not in dump


def dump_database() -> str:
    """The test database, dumped by its own tool: sqlite3's .dump or pg_dump."""
    settings = connection.settings_dict
    if settings["ENGINE"].endswith("sqlite3"):
        command = ["sqlite3", str(settings["NAME"]), ".dump"]
    else:
        command = ["pg_dump", database_url()]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def test_stored_values_are_encrypted_by_the_migration(home, transactional_db):
    executor = MigrationExecutor(connection)
    [target] = [
        key
        for key in executor.loader.graph.nodes
        if key[0] == "telemetry" and key[1].endswith("_secrets_at_rest")
    ]
    [before] = executor.loader.graph.node_map[target].parents
    executor.migrate([before.key])
    old = executor.loader.project_state([before.key]).apps
    org = old.get_model("telemetry", "Org").objects.create(name="acme")
    old.get_model("telemetry", "Secret").objects.create(org=org, name="HF_TOKEN", value=SECRET)

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    [sealed] = stored_column()
    assert SECRET not in sealed
    assert services.secrets_of(org.pk) == {"HF_TOKEN": SECRET}


# A lost, malformed or different key


def test_a_bad_key_in_the_environment_is_one_line_naming_the_variable(div):
    services.org_add(name="acme")
    div.env[encryption.KEY_ENV] = "not-a-key"

    refused = div("secrets", "set", "acme", "HF_TOKEN", input=SECRET)

    assert refused.returncode == 1
    assert refused.stderr == f"div: {encryption.BAD_ENV_KEY}\n"
    assert not Secret.objects.exists()


def test_a_key_that_cannot_be_read_or_made_is_one_line(div, tmp_path):
    services.org_add(name="acme")
    (tmp_path / "file").write_text("")
    div.env["DIVERGENT_HOME"] = str(tmp_path / "file")
    in_a_file = div("secrets", "set", "acme", "HF_TOKEN", input=SECRET)

    (tmp_path / "folder" / encryption.KEY_FILE).mkdir(parents=True)
    div.env["DIVERGENT_HOME"] = str(tmp_path / "folder")
    unreadable = div("secrets", "set", "acme", "HF_TOKEN", input=SECRET)

    (tmp_path / "home").mkdir()
    (tmp_path / "home" / encryption.KEY_FILE).symlink_to(tmp_path / "nowhere" / "key")
    div.env["DIVERGENT_HOME"] = str(tmp_path / "home")
    unmakeable = div("secrets", "set", "acme", "HF_TOKEN", input=SECRET)

    # A home that is a file stops every command before any key is looked for.
    home = tmp_path / "file"
    assert (in_a_file.returncode, in_a_file.stderr) == (
        1,
        f"div: DIVERGENT_HOME='{home}' cannot be a folder: {home} is a file; "
        "point DIVERGENT_HOME at a folder (it is made if missing)\n",
    )
    path = tmp_path / "folder" / encryption.KEY_FILE
    message = encryption.UNREADABLE_KEY.format(path=path, why="is a directory")
    assert (unreadable.returncode, unreadable.stderr) == (1, f"div: {message}\n")
    path = tmp_path / "home" / encryption.KEY_FILE
    message = encryption.UNWRITABLE_KEY.format(path=path, why="no such file or directory")
    assert (unmakeable.returncode, unmakeable.stderr) == (1, f"div: {message}\n")
    assert not Secret.objects.exists()


def test_a_key_from_the_environment_is_used_and_no_file_is_made(div, home):
    services.org_add(name="acme")
    key = Fernet.generate_key().decode()
    div.env[encryption.KEY_ENV] = key

    assert div("secrets", "set", "acme", "HF_TOKEN", input=SECRET).returncode == 0

    assert not (home / encryption.KEY_FILE).exists()
    assert Fernet(key).decrypt(stored_column()[0].encode()).decode() == SECRET


def test_a_lost_key_file_refuses_runs_and_new_secrets_in_one_line(div, home, tmp_path):
    assert div("secrets", "set", "default", "HF_TOKEN", input=SECRET).returncode == 0
    (home / encryption.KEY_FILE).unlink()

    ran = div("run", str(tmp_path), "--", sys.executable, "-c", "print('hi')")
    added = div("secrets", "set", "default", "OTHER", input="another-" + SECRET)

    missing = encryption.MISSING_KEY.format(path=home / encryption.KEY_FILE)
    assert (ran.returncode, ran.stderr, ran.stdout) == (1, f"div: {missing}\n", "")
    assert (added.returncode, added.stderr) == (1, f"div: {missing}\n")
    assert not Run.objects.exists()
    assert not (home / encryption.KEY_FILE).exists(), "a new key would strand the stored secrets"


def test_secrets_stored_with_another_key_are_one_line_never_no_secrets(div, tmp_path):
    assert div("secrets", "set", "default", "HF_TOKEN", input=SECRET).returncode == 0
    div.env[encryption.KEY_ENV] = Fernet.generate_key().decode()

    ran = div("run", str(tmp_path), "--", sys.executable, "-c", "print('hi')")

    wrong = encryption.WRONG_KEY.format(source=encryption.KEY_ENV)
    assert (ran.returncode, ran.stderr) == (1, f"div: {wrong}\n")
    assert not Run.objects.exists()


def test_the_ingester_waits_for_secrets_it_cannot_read_and_says_so_once(
    make_run, acme, monkeypatch, caplog
):
    services.secret_set(org=acme, name="HF_TOKEN", value=SECRET)
    telemetry = make_run()
    telemetry.write({"step": 1, "note": SECRET, SECRET: 1})
    monkeypatch.setenv(encryption.KEY_ENV, Fernet.generate_key().decode())

    with caplog.at_level(logging.ERROR, logger="divergent.ingest"):
        for _ in range(3):
            telemetry.ingester.tail_once()

    telemetry.run.refresh_from_db()
    assert telemetry.run.points == 0
    wrong = encryption.WRONG_KEY.format(source=encryption.KEY_ENV)
    assert [(r.getMessage(), r.exc_info) for r in caplog.records] == [
        (f"telemetry of org acme waits: {wrong}", None)
    ]

    monkeypatch.delenv(encryption.KEY_ENV)
    telemetry.ingest()
    assert telemetry.run.points == 1
    assert list(telemetry.run.keys.values_list("name", flat=True)) == ["step"]


# The admin


@pytest.fixture
def staff(client, db):
    client.force_login(get_user_model().objects.create_superuser("root", password="x"))
    return client


@pytest.mark.parametrize(
    "page,lookup",
    [
        ("secret", "value__regex"),
        ("secret", "value__startswith"),
        ("secret", "sealed__regex"),
        ("secret", "sealed__startswith"),
        ("secret", "sealed__length__gt"),
        ("secret", "sealed__isnull"),
        ("secret", "sealed"),
        ("org", "secrets__sealed__regex"),
        ("run", "org__secrets__sealed__startswith"),
    ],
)
def test_the_admin_answers_no_query_about_a_secret_value(staff, home, page, lookup):
    org = services.org_get_or_create(name="acme")
    services.secret_set(org=org, name="HF_TOKEN", value=SECRET)
    sealed = stored_column()[0]

    answers = set()
    for guess in ["^hf_Z", "^zzzz", "^" + sealed[:6], "hf_", "1", "True"]:
        response = staff.get(f"/admin/telemetry/{page}/", {"name": "HF_TOKEN", lookup: guess})
        answers.add((response.status_code, response.get("Location")))
        assert response.status_code != 200
    assert len(answers) == 1


def test_the_admin_lists_and_searches_secrets_by_name_alone(staff, home):
    org = services.org_get_or_create(name="acme")
    services.secret_set(org=org, name="HF_TOKEN", value=SECRET)

    page = staff.get("/admin/telemetry/secret/", {"name": "HF_TOKEN"})
    assert page.status_code == 200
    assert "1 secret" in page.content.decode()
    assert staff.get("/admin/telemetry/secret/", {"q": SECRET[:6]}).context["cl"].result_count == 0


def test_a_secret_added_in_the_admin_is_stored_encrypted(staff, home):
    org = services.org_get_or_create(name="acme")

    added = staff.post(
        "/admin/telemetry/secret/add/", {"org": org.pk, "name": "HF_TOKEN", "value": SECRET}
    )

    assert added.status_code == 302
    assert SECRET not in stored_column()[0]
    assert services.secrets_of(org.pk) == {"HF_TOKEN": SECRET}


def test_the_admin_refuses_a_secret_too_short_to_mask(staff, home):
    org = services.org_get_or_create(name="acme")

    refused = staff.post(
        "/admin/telemetry/secret/add/", {"org": org.pk, "name": "T", "value": "lo"}
    )

    assert refused.status_code == 200
    assert services.SECRET_TOO_SHORT in refused.content.decode().replace("&quot;", '"')
    assert not Secret.objects.exists()


@pytest.mark.parametrize("name", ["A=B", "bad name!", "1ST", "é"])
def test_the_admin_refuses_a_secret_name_no_environment_variable_can_have(staff, home, name):
    org = services.org_get_or_create(name="acme")

    refused = staff.post(
        "/admin/telemetry/secret/add/", {"org": org.pk, "name": name, "value": SECRET}
    )

    assert refused.status_code == 200
    said = services.BAD_SECRET_NAME.format(name=name)
    assert html.escape(said) in refused.content.decode()
    assert not Secret.objects.exists()


# How short is too short


def test_secret_set_refuses_a_value_under_eight_characters(home, db):
    org = services.org_get_or_create(name="acme")

    with pytest.raises(services.SecretRefused) as refused:
        services.secret_set(org=org, name="HF_TOKEN", value="1234567")

    assert str(refused.value) == services.SECRET_TOO_SHORT
    assert not Secret.objects.exists()
    services.secret_set(org=org, name="HF_TOKEN", value="12345678")
    assert services.secrets_of(org.pk) == {"HF_TOKEN": "12345678"}


PLAIN = [
    ("        ", services.SECRET_BLANK),
    ("\t \n \t \n \t \n", services.SECRET_BLANK),
    ("00000000", services.SECRET_ONE_CHARACTER),
    ("- - - - - - - -", services.SECRET_ONE_CHARACTER),
]


@pytest.mark.parametrize("value,refusal", PLAIN, ids=["spaces", "whitespace", "zeros", "dashes"])
def test_secret_set_refuses_a_value_that_would_mask_ordinary_text(home, db, value, refusal):
    org = services.org_get_or_create(name="acme")

    with pytest.raises(services.SecretRefused) as refused:
        services.secret_set(org=org, name="HF_TOKEN", value=value)

    assert str(refused.value) == refusal
    assert not Secret.objects.exists()


def test_div_secrets_set_refuses_a_whitespace_value_in_one_line(div):
    services.org_get_or_create(name="acme")

    refused = div("secrets", "set", "acme", "HF_TOKEN", input=" " * 12 + "\n")

    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == f"div: {services.SECRET_BLANK}\n"
    assert not Secret.objects.exists()


def test_div_secrets_set_refuses_one_character_repeated_in_one_line(div):
    services.org_get_or_create(name="acme")

    refused = div("secrets", "set", "acme", "HF_TOKEN", input="=" * 40)

    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == f"div: {services.SECRET_ONE_CHARACTER}\n"
    assert not Secret.objects.exists()


@pytest.mark.parametrize("value,refusal", PLAIN, ids=["spaces", "whitespace", "zeros", "dashes"])
def test_the_admin_refuses_a_value_that_would_mask_ordinary_text(staff, home, value, refusal):
    org = services.org_get_or_create(name="acme")

    refused = staff.post(
        "/admin/telemetry/secret/add/", {"org": org.pk, "name": "T", "value": value}
    )

    assert refused.status_code == 200
    assert refusal in html.unescape(refused.content.decode())
    assert not Secret.objects.exists()


def test_a_value_of_two_characters_or_more_besides_whitespace_is_a_secret(home, db):
    org = services.org_get_or_create(name="acme")

    services.secret_set(org=org, name="A", value="abababab")
    services.secret_set(org=org, name="B", value="00000001")
    services.secret_set(org=org, name="C", value="  hunter22  ")

    assert services.secrets_of(org.pk) == {"A": "abababab", "B": "00000001", "C": "  hunter22  "}


def test_div_secrets_set_refuses_a_short_value_in_one_line(div):
    services.org_add(name="acme")
    refused = div("secrets", "set", "acme", "HF_TOKEN", input="lo\n")

    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == f"div: {services.SECRET_TOO_SHORT}\n"
    assert not Secret.objects.exists()
