"""The words a careless user gives `div`: flags before any command, `div help COMMAND`, Django's
own commands, and values with a newline, an escape sequence or 300 characters in them. Each
error is one line, exit 2 for words it cannot read, 1 for a request it turns down."""

from __future__ import annotations

import json
import re
import tomllib

import pytest

from tests.conftest import ROOT, div_at
from tests.test_cli import one_line_error

# ---- words before any command -----------------------------------------------------------------


@pytest.mark.parametrize(
    "word, said",
    [
        ("-x", "div: unrecognized arguments: -x; div --help lists the options"),
        (
            "--settings=foo",
            "div: unrecognized arguments: --settings=foo; div --help lists the options",
        ),
        (
            "--versoin",
            "div: unrecognized arguments: --versoin (did you mean --version?); "
            "div --help lists the options",
        ),
    ],
)
def test_a_flag_before_any_command_is_a_usage_error_that_makes_nothing(tmp_path, word, said):
    home = tmp_path / "home"

    one_line_error(div_at(home, word), 2, said)
    assert not home.exists()


def test_div_version_prints_the_products_version(tmp_path):
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]

    shown = div_at(tmp_path / "home", "--version")

    assert (shown.returncode, shown.stdout, shown.stderr) == (0, f"div {declared}\n", "")
    assert "--version  Print div's version and exit." in div_at(tmp_path, "--help").stdout


@pytest.mark.parametrize("words", [["telemetry"], ["user", "add"], ["migrate"]])
def test_div_help_command_is_that_commands_help(tmp_path, words):
    home = tmp_path / "home"
    helped = div_at(home, "help", *words)

    assert helped.returncode == 0, helped.stderr
    assert helped.stdout == div_at(home, *words, "--help").stdout
    assert helped.stdout.startswith(f"{'Usage' if words[0] != 'migrate' else 'usage'}: div ")


def test_div_help_of_no_command_says_so_in_one_line(tmp_path):
    one_line_error(
        div_at(tmp_path, "help", "nosuch"),
        2,
        'div: there is no command "nosuch"; div help lists them',
    )


# ---- Django's own commands --------------------------------------------------------------------


def test_djangos_commands_give_one_line_usage_errors_and_refusals(div):
    one_line_error(
        div("migrate", "--bogus"),
        2,
        "div migrate: unrecognized arguments: --bogus; div migrate --help lists the options",
    )
    one_line_error(div("migrate", "nosuchapp"), 1, "div: No installed app with label 'nosuchapp'.")
    one_line_error(
        div("migrate", "--database", "other"),
        2,
        "div migrate: argument --database: invalid choice: 'other' (choose from 'default'); "
        "div migrate --help lists the options",
    )


# ---- values that would break the line -----------------------------------------------------------

ODD_VALUES = [
    (
        ["user", "link", "a\nb"],
        1,
        'div: "a\\nb" cannot name a user; use up to 100 letters, digits, _ and -, like alice',
    ),
    (
        ["user", "link", "\x1b[31mred"],
        1,
        'div: "\\u001b[31mred" cannot name a user; use up to 100 letters, digits, _ and -, '
        "like alice",
    ),
    (
        ["org", "add", "acme", "--member", "a\nb"],
        1,
        'div: "a\\nb" cannot name a user; use up to 100 letters, digits, _ and -, like alice',
    ),
    (
        ["org", "add", "a\nb"],
        1,
        'div: "a\\nb" cannot name an org; use up to 100 letters, digits, _ and -, like acme',
    ),
    (
        ["user", "add", "bob\n"],
        1,
        'div: "bob\\n" cannot name a user; use up to 100 letters, digits, _ and -, like alice',
    ),
    (
        ["user", "add", "x" * 300],
        1,
        f'div: "{"x" * 40}" cannot name a user; use up to 100 letters, digits, _ and -, like alice',
    ),
    (
        ["telemetry", "run-\n1"],
        2,
        'div telemetry: RUN: "run-\\n1" is not a run\'s name; name it like run-7 or 7; '
        "div telemetry --help lists the options",
    ),
    (
        ["serve", "--port", "1\n2"],
        2,
        'div serve: --port: "1\\n2" is not a port; use 1 to 65535, or 0 for any free one; '
        "div serve --help lists the options",
    ),
    (["tele\nmetry"], 2, 'div: there is no command "tele\\nmetry"; div help lists them'),
    (
        ["telemetry", "--a\nb"],
        2,
        "div telemetry: unrecognized arguments: --a\\nb; div telemetry --help lists the options",
    ),
    (
        ["user", "add", "a", "b\nc"],
        2,
        "div user add: Got unexpected extra argument (b\\nc); "
        "div user add --help lists the options",
    ),
    (
        ["run", "/no/such\n" + "d" * 300, "--", "true"],
        2,
        "div run: DIRECTORY: "
        + json.dumps(("/no/such\n" + "d" * 300)[:200])
        + " is not a directory; name the one to ship, like . or ./project; "
        "div run --help lists the options",
    ),
]


@pytest.mark.parametrize(
    "args, said",
    [
        (["run", "tests", "--org", "x y", "--", "true"], '"x y" cannot name an org'),
        (["run", "tests", "--org", "", "--", "true"], '"" cannot name an org'),
        (["org", "add", "newo", "--member", ""], '"" cannot name a user'),
        (["user", "link", "a b"], '"a b" cannot name a user'),
    ],
)
def test_a_name_nothing_can_have_is_said_so_not_sent_to_a_command_that_refuses_it(div, args, said):
    # "there is no org "x y"; div org add x y makes it" would send the user to another refusal.
    done = div(*args)

    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith(f"div: {said}; use up to 100 letters, digits, _ and -")
    assert done.stderr.count("\n") == 1 and "makes" not in done.stderr


@pytest.mark.parametrize(
    "args, code, said", ODD_VALUES, ids=[repr(" ".join(a))[:40] for a, _, _ in ODD_VALUES]
)
def test_an_error_that_shows_a_value_stays_one_line(div, args, code, said):
    one_line_error(div(*args), code, said)


# ---- div serve --host ---------------------------------------------------------------------------


def test_a_host_that_names_no_address_is_a_usage_error_naming_host(div):
    done = div("serve", "--host", "nosuch.invalid", "--port", "0")

    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert re.fullmatch(
        r'div serve: --host: "nosuch\.invalid" is not an address of this machine \([a-z ]+\); '
        r"name one, like 127\.0\.0\.1, or 0\.0\.0\.0 for all of them; "
        r"div serve --help lists the options\n",
        done.stderr,
    ), done.stderr


def test_an_address_of_another_machine_is_refused_naming_host(div):
    one_line_error(
        div("serve", "--host", "192.0.2.1", "--port", "0"),  # TEST-NET-1: never this machine's
        1,
        "div: cannot serve on 192.0.2.1:0: Cannot assign requested address; pick another --host",
    )
