"""A process's output is masked as it arrives, in pieces of any size: only what could still be the
start of a secret is held back, and never more than a bounded amount."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from telemetry.masking import HOLD_LIMIT, MIN_LENGTH, Masker, StreamMasker

SECRET = "s3cr3t-passw0rd"


def stream(masker: Masker, pieces: list[bytes]) -> tuple[list[bytes], bytes]:
    """What each piece let out, and everything once flushed."""
    masking = StreamMasker(masker)
    out = [masking.feed(piece) for piece in pieces]
    return out, b"".join(out) + masking.flush()


def test_a_secret_split_across_two_writes_is_masked():
    out, whole = stream(Masker([SECRET]), [b"token: s3cr3t-", b"passw0rd\n"])

    assert out == [b"token: ", b"***\n"]
    assert whole == b"token: ***\n"


def test_only_a_possible_start_of_a_secret_is_held_back():
    masking = StreamMasker(Masker([SECRET]))

    assert masking.feed(b"epoch 1 s3c") == b"epoch 1 "
    assert masking.holding == 3
    # Not the secret after all: it goes out with what follows.
    assert masking.feed(b"ond pass\n") == b"s3cond pass\n"
    assert masking.holding == 0


# Its Base64 holds + and / at every alignment, so the URL-safe form (- and _) is another text.
SLASHED = "s3cr3t~~~???>>>"


@pytest.mark.parametrize(
    "before,shown",
    [("", b"auth="), ("a", b"auth=YX"), ("ab", b"auth=YWJ")],
    ids=["aligned", "one byte in", "two bytes in"],
)
@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode])
def test_a_secret_in_base64_split_across_two_writes_is_masked(before, shown, encode):
    # The digits that mix the secret with what is before it go out at once, the rest as ***.
    encoded = encode((before + SLASHED).encode()).rstrip(b"=")
    assert len({b"+", b"/", b"-", b"_"} & {bytes([c]) for c in encoded}) == 2

    out, whole = stream(Masker([SLASHED]), [b"auth=" + encoded[:9], encoded[9:] + b"\n"])

    assert out == [shown, b"***\n"]
    assert whole == shown + b"***\n"


def test_a_progress_bar_without_a_newline_goes_out_at_once():
    masking = StreamMasker(Masker([SECRET]))

    assert masking.feed(b"\r 10%|#         |") == b"\r 10%|#         |"
    assert masking.feed(b"\r 20%|##        |") == b"\r 20%|##        |"


def test_what_is_held_at_the_end_goes_out_masked():
    _, whole = stream(Masker([SECRET]), [b"token s3cr3t-passw0rd", b" and s3cr3t"])
    assert whole == b"token *** and s3cr3t"


def test_a_secret_set_while_streaming_masks_what_comes_next():
    masking = StreamMasker(Masker([]))
    assert masking.feed(b"before s3cr3t-passw0rd\n") == b"before s3cr3t-passw0rd\n"

    masking.masker = Masker([SECRET])

    assert masking.feed(b"after s3cr3t-passw0rd\n") == b"after ***\n"


def test_a_long_run_of_overlapping_matches_is_held_within_the_limit_and_never_shown():
    masking = StreamMasker(Masker(["aaaaaaaa"]))
    data = b"<" + b"a" * (20 * HOLD_LIMIT) + b">"
    out, held = [], []
    for at in range(0, len(data), 4096):
        out.append(masking.feed(data[at : at + 4096]))
        held.append(masking.holding)
    out.append(masking.flush())

    assert max(held) <= HOLD_LIMIT
    whole = b"".join(out)
    assert whole.startswith(b"<***") and whole.endswith(b"***>")
    assert b"a" not in whole


def test_output_without_secrets_is_never_held():
    masking = StreamMasker(Masker([]))
    assert masking.feed(b"loss 0.5 \r") == b"loss 0.5 \r"
    assert masking.holding == 0


# Hypothesis: pieces of any size mask as the whole does

secrets = st.text(alphabet="ab-\n", min_size=MIN_LENGTH, max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(secrets, min_size=1, max_size=3),
    st.lists(st.text(alphabet="ab-\n", max_size=30), max_size=6),
    st.data(),
)
def test_pieces_of_any_size_are_masked_as_the_whole_is(values, texts, data):
    masker = Masker(values)
    text = "".join(data.draw(st.permutations([*values, *texts]))).encode()
    cuts = sorted(data.draw(st.sets(st.integers(1, max(len(text) - 1, 1)), max_size=8)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]

    _, whole = stream(masker, pieces)

    assert whole == masker.mask(text)
    for secret in values:
        assert secret.encode() not in whole
