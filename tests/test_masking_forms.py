"""Every form a secret can take is masked: its lines, Base64 and URL encodings, overlaps with
other secrets, command lines and flattened keys; a value too short to mask is not."""

from __future__ import annotations

import base64
import json
import re
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from telemetry.lines import Line, read_line
from telemetry.masking import MIN_LENGTH, Masker, too_plain

PEM = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACDx2bBBkCvpMhZ0Qw9BQ1Wn5VYp3YG9n2p1sY5sWJ+PQwAAAJgzV+xmM1fs\n"
    "Zg==\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)
BODY = PEM.splitlines()[1:3]


# Multi-line secrets


def test_each_line_of_a_multi_line_secret_is_masked_where_it_is_printed_alone():
    log = "".join(f"key> {line}\n" for line in PEM.splitlines()).encode()

    masked = Masker([PEM]).mask(log)

    assert masked.decode().splitlines() == [
        "key> ***",
        "key> ***",
        "key> ***",
        "key> Zg==",
        "key> ***",
    ]


def test_a_multi_line_secret_printed_whole_is_one_mask():
    assert Masker([PEM]).mask(b"key:\n" + PEM.encode() + b"done\n") == b"key:\n***done\n"


def test_a_line_of_a_multi_line_secret_is_masked_whatever_its_line_endings():
    masked = Masker([PEM]).mask(PEM.replace("\n", "\r\n").encode())

    for line in BODY:
        assert line.encode() not in masked


def test_a_short_line_of_a_multi_line_secret_is_masked_only_with_the_whole_value():
    # On its own, "{" would mask every telemetry line; the whole JSON is masked where it stands.
    secret = '{\n  "user": "alice",\n  "password": "tr0ub4dor&3"\n}'
    masker = Masker([secret])

    assert masker.mask(b'{"step": 1}') == b'{"step": 1}'
    assert masker.mask(b"creds " + secret.encode()) == b"creds ***"
    assert masker.mask(b'  "password": "tr0ub4dor&3"\n') == b"  ***\n"


# Overlapping secrets


@pytest.mark.parametrize(
    "secrets,text,masked",
    [
        (["AAAA-overlap", "overlap-BBBB"], b"x AAAA-overlap-BBBB y", b"x *** y"),
        (["overlap-BBBB", "AAAA-overlap"], b"AAAA-overlap-BBBB", b"***"),
        (["abcdefgh", "cdefghij", "ghijklmn"], b"<abcdefghijklmn>", b"<***>"),
        (["abcdefgh", "abcdefghijkl"], b"abcdefghijkl abcdefgh", b"*** ***"),
        # Touching is not overlapping: each secret is its own mask.
        (["abcdefgh", "ijklmnop"], b"abcdefghijklmnop", b"******"),
    ],
)
def test_overlapping_secrets_are_masked_as_the_union_of_every_match(secrets, text, masked):
    assert Masker(secrets).mask(text) == masked


# Encoded forms

SECRET = "s3cr3t-passw0rd"


@pytest.mark.parametrize(
    "before,after,masked",
    [
        # Aligned with a group of three bytes, then one and two bytes in: the digits that mix
        # the secret with its neighbours stay, every digit made of the secret alone goes.
        ("", "", "***"),
        ("", "x", "***eA=="),
        ("a", "", "YX***=="),
        ("a", "yz", "YX***Hl6"),
        ("ab", "", "YWJ***="),
        ("ab", "x", "YWJ***R4"),
        ("alice:", "", "YWxpY2U6***"),
        ("alice:", "@host", "YWxpY2U6***QGhvc3Q="),
    ],
)
def test_a_secret_is_masked_in_base64_at_each_of_the_three_alignments(before, after, masked):
    encoded = base64.b64encode((before + SECRET + after).encode())
    urlsafe = base64.urlsafe_b64encode((before + SECRET + after).encode())

    assert Masker([SECRET]).mask(encoded) == masked.encode()
    assert Masker([SECRET]).mask(urlsafe) == masked.encode()


# Its Base64 holds + and / at every alignment, so the URL-safe form (- and _) is another text.
SLASHED = "s3cr3t~~~???>>>"


@pytest.mark.parametrize(
    "before,after,masked",
    [
        ("", "", "***"),
        ("", "x", "***eA=="),
        ("a", "", "YX***=="),
        ("a", "yz", "YX***nl6"),
        ("ab", "", "YWJ***="),
        ("ab", "x", "YWJ***54"),
        ("alice:", "@host", "YWxpY2U6***QGhvc3Q="),
    ],
)
def test_a_secret_is_masked_in_url_safe_base64_at_each_of_the_three_alignments(
    before, after, masked
):
    raw = (before + SLASHED + after).encode()
    encoded, urlsafe = base64.b64encode(raw), base64.urlsafe_b64encode(raw)
    assert b"+" in encoded and b"/" in encoded and urlsafe != encoded

    assert Masker([SLASHED]).mask(encoded) == masked.encode()
    assert Masker([SLASHED]).mask(urlsafe) == masked.encode()


def test_a_key_that_is_a_secret_in_url_safe_base64_is_left_out_of_the_point():
    # Its digits and - and _ make a key a point could carry: only masking keeps it out.
    key = base64.urlsafe_b64encode(SLASHED.encode()).decode()
    raw = json.dumps({key: 1, "step": 2}).encode()
    assert read_line(raw) == Line({key: 1, "step": 2})

    assert Masker([SLASHED]).read_line(raw) == Line({"step": 2}, secret_keys=("***",))


def test_a_secret_is_masked_in_base64_without_its_padding():
    encoded = base64.b64encode(SECRET.encode()).rstrip(b"=")
    assert Masker([SECRET]).mask(b"token=" + encoded + b";") == b"token=***;"


def test_a_secret_is_masked_in_a_basic_auth_header():
    header = b"Authorization: Basic " + base64.b64encode(f"alice:{SECRET}".encode())
    assert Masker([SECRET]).mask(header) == b"Authorization: Basic YWxpY2U6***"


@pytest.mark.parametrize("encode", [quote, quote_plus], ids=["percent", "form"])
def test_a_secret_is_masked_url_encoded(encode):
    secret = "p@ss w/rd&more=1"
    url = f"https://hub.example/?token={encode(secret, safe='')}&page=2"

    assert Masker([secret]).mask(url.encode()) == b"https://hub.example/?token=***&page=2"


def lower_escapes(encoded: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda escape: escape[0].lower(), encoded)


@pytest.mark.parametrize(
    "encode",
    [
        quote,  # Python's default keeps / unescaped: safe="/"
        lambda value: quote(value, safe=""),
        quote_plus,
        lambda value: lower_escapes(quote(value)),
        lambda value: lower_escapes(quote(value, safe="")),
        lambda value: lower_escapes(quote_plus(value)),
    ],
    ids=["quote", "quote-all", "quote_plus", "quote-lower", "quote-all-lower", "quote_plus-lower"],
)
@pytest.mark.parametrize("secret", ["wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "p@ss w/rd&more=1"])
def test_a_secret_is_masked_however_python_url_encodes_it(encode, secret):
    url = f"https://hub.example/?token={encode(secret)}&page=2"

    assert Masker([secret]).mask(url.encode()) == b"https://hub.example/?token=***&page=2"


# Values too short to mask


@pytest.mark.parametrize("short", ["lo", '"', "1", "abcdefg"])
def test_a_value_shorter_than_the_minimum_masks_nothing(short):
    line = b'{"loss": 0.5, "lo": 1, "note": "abcdefg"}'
    masker = Masker([short])

    assert not masker
    assert masker.mask(line) == line
    assert masker.read_line(line) == Line({"loss": 0.5, "lo": 1})


@pytest.mark.parametrize(
    "value,plain",
    [
        ("        ", True),
        ("\t\r\n\u00a0\u3000   ", True),
        ("00000000", True),
        ("--------------------------------", True),
        ("= = = = = = = =", True),
        ("\naaaaaaaa\n", True),
        ("abababab", False),
        ("00000001", False),
        ("hunter22", False),
        ("  s3cr3t-passw0rd  ", False),
    ],
)
def test_a_value_of_whitespace_or_one_character_over_and_over_is_too_plain(value, plain):
    assert too_plain(value) is plain


def test_the_minimum_is_eight_characters_not_bytes():
    assert MIN_LENGTH == 8
    assert Masker(["pässwörd"]).mask("x pässwörd".encode()) == b"x ***"
    assert not Masker(["pässwör"])


# Command lines


def test_a_secret_in_a_command_line_is_masked_in_its_argument():
    masker = Masker([SECRET])
    command = ["python", "w.py", "--token", SECRET, f"--auth=Bearer {SECRET}"]

    assert masker.mask_args(command) == ["python", "w.py", "--token", "***", "--auth=Bearer ***"]


def test_a_secret_with_a_space_passed_as_two_arguments_is_masked_in_both():
    masker = Masker(["correct horse battery"])
    command = ["login", "correct", "horse", "battery", "--now"]

    assert masker.mask_args(command) == ["login", "***", "***", "***", "--now"]


def test_a_command_line_without_secrets_is_kept_as_it_is():
    assert Masker([SECRET]).mask_args(["python", "train.py", "--lr", "3e-4"]) == [
        "python",
        "train.py",
        "--lr",
        "3e-4",
    ]


# Layouts


def test_every_string_of_a_parsed_layout_is_masked_and_its_names_and_numbers_kept():
    layout = {
        "x": "step",
        "default": False,
        "panels": [
            {"title": f"Loss for {SECRET}", "y": [SECRET, "loss"], "min": 0.5, "wide": True}
        ],
        "stats": [{"title": None, "y": f"eval.{SECRET}", "reduce": "min"}],
    }

    assert Masker([SECRET]).mask_json(layout) == {
        "x": "step",
        "default": False,
        "panels": [{"title": "Loss for ***", "y": ["***", "loss"], "min": 0.5, "wide": True}],
        "stats": [{"title": None, "y": "eval.***", "reduce": "min"}],
    }
    assert Masker([]).mask_json(layout) == layout


# Flattened keys


def test_a_secret_split_across_nested_keys_is_left_out_of_the_point():
    masker = Masker(["tokenpart-one.tokenpart-two"])
    raw = json.dumps({"tokenpart-one": {"tokenpart-two": 4}, "step": 1}).encode()

    assert read_line(raw) == Line({"tokenpart-one.tokenpart-two": 4, "step": 1})
    assert masker.read_line(raw) == Line({"step": 1}, secret_keys=("***",))


def test_a_secret_inside_a_flattened_key_is_left_out_even_when_passed_over():
    masker = Masker(["run-a.secret"])
    raw = b'{"eval": {"run-a": {"secret": NaN}, "loss": 0.25}}'

    assert masker.read_line(raw) == Line({"eval.loss": 0.25}, secret_keys=("eval.***",))


def test_a_key_that_holds_a_secret_is_left_out_as_a_secret_key_not_as_a_bad_name():
    raw = json.dumps({"hunter22": 1, "train/loss": 2, "eval": {"x-hunter22": 3}, "step": 4})

    assert Masker(["hunter22"]).read_line(raw.encode()) == Line(
        {"step": 4}, bad_keys=("train/loss",), secret_keys=("***", "eval.x-***")
    )


def test_stars_in_a_key_of_a_line_that_holds_no_secret_are_a_bad_name():
    raw = b'{"***": 1, "step": 2}'
    assert Masker(["hunter22"]).read_line(raw) == Line({"step": 2}, bad_keys=("***",))


def test_a_line_whose_keys_hold_no_secret_is_read_as_it_was():
    raw = b'{"eval": {"loss": 0.25}, "step": 3}'
    assert Masker([SECRET]).read_line(raw) == read_line(raw)


# Hypothesis: no form of any secret survives masking, whatever the secrets and the text

# Stars are what a mask is made of: a secret holding one could be spelt by a mask and its
# neighbours (test_masking.py says more).
secrets = st.text(min_size=MIN_LENGTH, max_size=40).filter(lambda s: "*" not in s)
fillers = st.binary(max_size=12)


def determined_digits(before: bytes, secret: bytes, after: bytes) -> bytes:
    """The Base64 digits, in the encoding of before + secret + after, made of secret's bits alone:
    worked out from the bit positions, independently of the masker's own forms."""
    encoded = base64.b64encode(before + secret + after)
    first = -(-8 * len(before) // 6)
    whole = 8 * (len(before) + len(secret)) // 6
    return encoded[first:whole]


@settings(max_examples=300, deadline=None)
@given(st.lists(secrets, min_size=1, max_size=3), fillers, fillers, st.data())
def test_no_form_of_any_secret_survives_masking(values, before, after, data):
    pieces = [before]
    for secret in values:
        raw = secret.encode()
        pieces += [
            raw,
            json.dumps(secret)[1:-1].encode(),
            json.dumps(secret, ensure_ascii=False)[1:-1].encode(),
            quote(secret, safe="").encode(),
            lower_escapes(quote(secret)).encode(),
            base64.b64encode(data.draw(fillers) + raw + data.draw(fillers)),
            base64.urlsafe_b64encode(data.draw(fillers) + raw + data.draw(fillers)),
            data.draw(fillers),
        ]
    pieces.append(after)
    text = b"".join(data.draw(st.permutations(pieces)))

    masked = Masker(values).mask(text)

    for secret in values:
        raw = secret.encode()
        assert raw not in masked
        assert json.dumps(secret)[1:-1].encode() not in masked
        assert quote(secret, safe="").encode() not in masked
        assert lower_escapes(quote(secret)).encode() not in masked
        for skip in range(3):
            digits = determined_digits(bytes(skip), raw, b"")
            assert digits not in masked
            assert digits.translate(bytes.maketrans(b"+/", b"-_")) not in masked


@settings(max_examples=200, deadline=None)
@given(secrets, fillers, fillers)
def test_every_base64_digit_made_of_a_secret_alone_is_masked(secret, before, after):
    raw = secret.encode()
    masked = Masker([secret]).mask(base64.b64encode(before + raw + after))
    assert determined_digits(before, raw, after) not in masked
    assert b"***" in masked


@settings(max_examples=200, deadline=None)
@given(st.lists(secrets, min_size=1, max_size=3), st.lists(st.text(max_size=8), max_size=4))
def test_no_secret_survives_in_a_masked_command_line(values, words):
    command = [*words, *values, " ".join(values)]
    masked = " ".join(Masker(values).mask_args(command))
    for secret in values:
        assert secret not in masked
