"""Any value of one of the org's secrets is masked before a line is read, as it is in the log."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from telemetry.lines import Line, read_line
from telemetry.masking import Masker


def dumps(obj: object, ensure_ascii: bool = True) -> bytes:
    return json.dumps(obj, ensure_ascii=ensure_ascii).encode("utf-8")


def every_form(secret: str) -> set[bytes]:
    """The secret as written, and as Python's json writes it inside a string either way."""
    return {
        secret.encode("utf-8"),
        json.dumps(secret, ensure_ascii=True)[1:-1].encode("utf-8"),
        json.dumps(secret, ensure_ascii=False)[1:-1].encode("utf-8"),
    }


def strings_in(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in [key, *strings_in(item)]]
    if isinstance(value, list):
        return [s for item in value for s in strings_in(item)]
    return []


def test_a_secret_in_a_line_is_replaced_by_stars():
    masked = Masker(["hunter22"]).mask(b'{"token": "hunter22", "step": 1}')
    assert masked == b'{"token": "***", "step": 1}'


def test_a_masked_line_keeps_its_numbers():
    masked = Masker(["hunter22"]).mask(dumps({"token": "hunter22", "step": 1, "loss": 0.5}))
    assert read_line(masked) == Line({"step": 1, "loss": 0.5})


def test_a_secret_inside_a_longer_string_is_masked_and_the_rest_kept():
    masked = Masker(["hunter22"]).mask(dumps({"auth": "Bearer hunter22 (prod)"}))
    assert masked == b'{"auth": "Bearer *** (prod)"}'


def test_every_occurrence_of_a_secret_is_masked():
    masked = Masker(["s3cr3t-v4l"]).mask(dumps({"a": "s3cr3t-v4l", "b": "x-s3cr3t-v4l-s3cr3t-v4l"}))
    assert masked == b'{"a": "***", "b": "x-***-***"}'


@pytest.mark.parametrize(
    "secret,line,masked",
    [
        ('pa"ssword', dumps({"token": 'pa"ssword', "step": 1}), b'{"token": "***", "step": 1}'),
        (
            "C:\\tmp\\keys",
            dumps({"path": "C:\\tmp\\keys", "step": 1}),
            b'{"path": "***", "step": 1}',
        ),
        ("line\nbreak", dumps({"k": "line\nbreak", "step": 1}), b'{"k": "***", "step": 1}'),
        ("tab\there", dumps({"k": "tab\there", "step": 1}), b'{"k": "***", "step": 1}'),
        ("pässwörd", dumps({"k": "pässwörd", "step": 1}), b'{"k": "***", "step": 1}'),
        (
            "pässwörd",
            dumps({"k": "pässwörd", "step": 1}, ensure_ascii=False),
            b'{"k": "***", "step": 1}',
        ),
        ("keyring🔑", dumps({"k": "keyring🔑", "step": 1}), b'{"k": "***", "step": 1}'),
        (
            "keyring🔑",
            dumps({"k": "keyring🔑", "step": 1}, ensure_ascii=False),
            b'{"k": "***", "step": 1}',
        ),
    ],
)
def test_a_secret_is_masked_in_the_form_json_escapes_it_to(secret, line, masked):
    assert Masker([secret]).mask(line) == masked


def test_a_secret_used_as_a_key_is_masked():
    masked = Masker(["hunter22"]).mask(dumps({"hunter22": 1, "step": 2}))
    assert masked == b'{"***": 1, "step": 2}'
    # A key of stars is not a key: it is left out, the rest kept.
    assert read_line(masked) == Line({"step": 2}, bad_keys=("***",))


def test_a_secret_that_contains_another_is_masked_whole():
    masked = Masker(["abcdefgh", "abcdefghijkl"]).mask(b'{"k": "abcdefghijkl", "j": "abcdefgh"}')
    assert masked == b'{"k": "***", "j": "***"}'


def test_two_secrets_are_both_masked():
    masked = Masker(["hunter22", "tr0ub4dor"]).mask(dumps({"a": "hunter22", "b": "tr0ub4dor"}))
    assert masked == b'{"a": "***", "b": "***"}'


def test_a_secret_with_stars_in_it_is_masked():
    assert Masker(["pa**word"]).mask(b'{"k": "pa**word"}') == b'{"k": "***"}'


def test_a_line_without_a_secret_is_left_as_it_was():
    line = dumps({"step": 1, "loss": 0.5})
    assert Masker(["hunter22"]).mask(line) == line


def test_no_secrets_mask_nothing():
    masker = Masker([])
    assert not masker
    assert masker.mask(b'{"step": 1}') == b'{"step": 1}'


def test_an_empty_secret_masks_nothing():
    masker = Masker([""])
    assert not masker
    assert masker.mask(b'{"step": 1}') == b'{"step": 1}'


def test_a_secret_is_masked_in_log_text():
    masker = Masker(["hunter22"])
    assert masker.mask_text("connecting with hunter22…\n") == "connecting with ***…\n"


def test_a_secret_is_masked_in_log_text_where_a_run_printed_its_json():
    masker = Masker(['pa"ssword'])
    assert masker.mask_text('{"password": "pa\\"ssword"}\n') == '{"password": "***"}\n'


# Hypothesis: no secret survives, in any form

# A secret made only of stars cannot be absent from a line masked with stars, and a mask beside
# a star can spell one that ends in a star: so the secrets here hold none.
secrets = st.text(min_size=8).filter(lambda s: "*" not in s)
texts = st.text(max_size=10)


@settings(max_examples=200)
@given(secrets, texts, texts, st.booleans(), st.sampled_from(["value", "key", "nested"]))
def test_a_secret_in_any_json_line_is_masked_in_every_form(
    secret, before, after, ascii_only, where
):
    text = before + secret + after
    obj: dict = {"step": 1, "note": text}
    if where == "key":
        obj = {"step": 1, text: 0.5}
    elif where == "nested":
        obj = {"step": 1, "eval": {"tags": ["x", text]}}
    masked = Masker([secret]).mask(dumps(obj, ensure_ascii=ascii_only))

    for form in every_form(secret):
        assert form not in masked
    try:
        value = json.loads(masked)
    except ValueError:
        return  # masking broke the line: it is dropped, which keeps the secret too
    for string in strings_in(value):
        assert secret not in string


@settings(max_examples=200)
@given(st.lists(secrets, min_size=1, max_size=4), st.lists(texts, max_size=4), st.booleans())
def test_several_secrets_in_any_json_line_are_all_masked(values, fillers, ascii_only):
    line = dumps(
        {"step": 1, "notes": [*values, *fillers, "".join(values)]}, ensure_ascii=ascii_only
    )
    masked = Masker(values).mask(line)
    for secret in values:
        for form in every_form(secret):
            assert form not in masked
