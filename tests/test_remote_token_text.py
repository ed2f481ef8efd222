"""A token or an address that no request can carry (a line break, a character outside ASCII,
as a copy from a CRLF file or a chat window brings) is one line before anything is sent,
never a traceback; a token's surrounding whitespace is left out, as div login does."""

from __future__ import annotations

import pytest

from tests.browser import free_port
from tests.conftest import div_at
from tests.remote import nowhere

TOKEN_SAID = (
    "{where} holds a line break, a control character or one outside ASCII, which no token "
    "has: copy the token again, as div token create or the account page printed it\n"
)


def machine(tmp_path, *args, input=None, **env):
    env = {"DATABASE_URL": nowhere(), "XDG_CONFIG_HOME": str(tmp_path / "config"), **env}
    return div_at(tmp_path / "home", *args, input=input, **env)


@pytest.mark.parametrize("token", ["div_a\nb", "div_\u20ac", "div_a\x1bb"], ids=repr)
def test_a_token_no_header_can_carry_is_one_line(tmp_path, token):
    url = f"http://127.0.0.1:{free_port()}"
    done = machine(tmp_path, "telemetry", DIVERGENT_URL=url, DIVERGENT_TOKEN=token)

    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == "div: " + TOKEN_SAID.format(where="DIVERGENT_TOKEN")


def test_a_token_kept_with_a_character_no_header_can_carry_is_one_line(tmp_path):
    kept = tmp_path / "config" / "divergent" / "config.toml"
    kept.parent.mkdir(parents=True)
    kept.write_text(f'url = "http://127.0.0.1:{free_port()}"\ntoken = "div_\\u20ac"\n')

    done = machine(tmp_path, "telemetry")

    assert (done.returncode, done.stderr) == (1, "div: " + TOKEN_SAID.format(where=kept))


def test_div_login_given_a_token_no_header_can_carry_says_so(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    done = machine(tmp_path, "login", url, input="div_\u20ac\n")

    assert (done.returncode, done.stderr) == (
        1,
        "div: " + TOKEN_SAID.format(where="the token given"),
    )
    assert not (tmp_path / "config").exists()


def test_a_token_with_a_line_end_is_sent_without_it(tmp_path):
    """`DIVERGENT_TOKEN=$(cat token.txt)` keeps a CRLF file's carriage return."""
    url = f"http://127.0.0.1:{free_port()}"
    done = machine(tmp_path, "telemetry", DIVERGENT_URL=url, DIVERGENT_TOKEN="div_abc\r")

    assert done.returncode == 1
    assert done.stderr.startswith(f"div: cannot reach the server at {url} ("), done.stderr
    assert done.stderr.count("\n") == 1


def test_an_address_no_request_line_can_carry_is_one_line(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/t\u00e9l\u00e9m\u00e9trie"
    done = machine(tmp_path, "telemetry", DIVERGENT_URL=url, DIVERGENT_TOKEN="div_abc")

    assert (done.returncode, done.stderr) == (
        1,
        f"div: DIVERGENT_URL holds {url!r}, with a space, a control character or one outside "
        "ASCII: write the address as the browser shows it, %-encoded, like "
        "https://div.example.com\n",
    )
