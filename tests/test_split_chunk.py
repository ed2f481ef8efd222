"""Complete lines only: how the ingester cuts what it read from a run's file into lines."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from telemetry.ingest import split_chunk
from telemetry.lines import Line, Reason, read_line


def line_of(size: int, fill: bytes = b"x") -> bytes:
    """A JSON object of exactly `size` bytes, carrying loss 0.5."""
    head = b'{"loss": 0.5, "pad": "'
    tail = b'"}'
    return head + fill * (size - len(head) - len(tail)) + tail


def test_complete_lines_are_taken_and_a_partial_line_waits():
    chunk = b'{"step": 1}\n{"step": 2}\n{"ste'
    assert split_chunk(chunk, complete=False, in_long_line=False) == (
        [b'{"step": 1}', b'{"step": 2}'],
        24,
        False,
    )


def test_a_partial_line_alone_waits_for_its_newline():
    assert split_chunk(b'{"step": 1', complete=False, in_long_line=False) == ([], 0, False)


def test_nothing_read_is_nothing_taken():
    assert split_chunk(b"", complete=False, in_long_line=False) == ([], 0, False)
    assert split_chunk(b"", complete=True, in_long_line=False) == ([], 0, False)


def test_the_last_line_needs_no_newline_once_the_run_has_ended():
    chunk = b'{"step": 1}\n{"step": 2}'
    assert split_chunk(chunk, complete=True, in_long_line=False) == (
        [b'{"step": 1}', b'{"step": 2}'],
        len(chunk),
        False,
    )


def test_a_file_ending_in_a_newline_has_no_extra_line_when_the_run_has_ended():
    chunk = b'{"step": 1}\n'
    assert split_chunk(chunk, complete=True, in_long_line=False) == ([b'{"step": 1}'], 12, False)


def test_a_crlf_line_is_taken_with_its_carriage_return_which_reading_ignores():
    lines, consumed, _ = split_chunk(b'{"step": 1}\r\n', complete=False, in_long_line=False)
    assert (lines, consumed) == ([b'{"step": 1}\r'], 13)
    assert read_line(lines[0]) == Line({"step": 1})


def test_a_4096_byte_crlf_line_waiting_for_its_newline_waits():
    # 4,097 bytes without a newline may still be a 4,096-byte line and its \r.
    chunk = line_of(4096) + b"\r"
    assert split_chunk(chunk, complete=False, in_long_line=False) == ([], 0, False)
    lines, consumed, in_long_line = split_chunk(chunk + b"\n", complete=False, in_long_line=False)
    assert (consumed, in_long_line) == (4098, False)
    assert [read_line(line) for line in lines] == [Line({"loss": 0.5})]


def test_a_line_past_4097_bytes_without_its_newline_is_taken_at_once_and_dropped():
    chunk = b'{"step": 1}\n' + line_of(5000)[:4098]
    lines, consumed, in_long_line = split_chunk(chunk, complete=False, in_long_line=False)
    assert consumed == len(chunk) and in_long_line is True
    assert [read_line(line) for line in lines] == [Line({"step": 1}), Reason.TOO_LONG]


def test_the_rest_of_a_long_line_is_skipped_up_to_its_newline():
    rest = line_of(5000)[4098:] + b'\n{"step": 2}\n{"st'
    assert split_chunk(rest, complete=False, in_long_line=True) == (
        [b'{"step": 2}'],
        len(rest) - 4,
        False,
    )


def test_a_long_line_still_without_its_newline_is_skipped_whole():
    assert split_chunk(b"x" * 100, complete=False, in_long_line=True) == ([], 100, True)


def test_a_long_line_that_ends_the_file_of_an_ended_run_ends_the_long_line():
    assert split_chunk(b"x" * 100, complete=True, in_long_line=True) == ([], 100, False)


def test_a_long_line_with_its_newline_in_the_chunk_is_taken_whole_and_dropped():
    chunk = line_of(5000) + b'\n{"step": 2}\n'
    lines, consumed, in_long_line = split_chunk(chunk, complete=False, in_long_line=False)
    assert (consumed, in_long_line) == (len(chunk), False)
    assert [read_line(line) for line in lines] == [Reason.TOO_LONG, Line({"step": 2})]


# Hypothesis: fed in any pieces, every line comes out once, whole and in order

line_specs = st.lists(
    st.tuples(st.sampled_from([0, 1, 10, 100, 4095, 4096, 4097, 4098, 5000, 9000]), st.booleans())
    | st.tuples(st.integers(0, 200), st.booleans()),
    max_size=12,
)


def make_lines(specs: list[tuple[int, bool]]) -> list[bytes]:
    """Distinct lines of the given sizes, some ending in \\r (counted in the size)."""
    lines = []
    for i, (size, crlf) in enumerate(specs):
        body = (b"%d:" % i + b"abcdefghij" * (size // 10 + 1))[:size]
        if crlf and size:
            body = body[:-1] + b"\r"
        lines.append(body)
    return lines


@settings(max_examples=200, deadline=None)
@given(
    line_specs,
    st.booleans(),
    st.lists(st.integers(0, 60_000), max_size=8),
    st.none() | st.integers(4098, 12_000),
)
def test_lines_fed_in_any_pieces_come_out_whole_once_each_and_in_order(
    specs, newline_at_end, cuts, read_at_most
):
    lines = make_lines(specs)
    if not lines or not lines[-1]:
        newline_at_end = True  # an empty last line without its newline is no line at all
    data = b"\n".join(lines) + (b"\n" if newline_at_end and lines else b"")

    taken: list[bytes] = []
    offset, in_long_line = 0, False

    def drain(size: int, ended: bool) -> None:
        # What the ingester does on each pass: read from the stored offset, keep what was consumed.
        nonlocal offset, in_long_line
        while offset < size:
            end = size if read_at_most is None else min(size, offset + read_at_most)
            chunk = data[offset:end]
            complete = ended and end >= size
            got, consumed, in_long_line = split_chunk(
                chunk, complete=complete, in_long_line=in_long_line
            )
            assert 0 <= consumed <= len(chunk)
            taken.extend(got)
            if not consumed:
                assert not complete
                return  # a line waiting for its newline
            offset += consumed

    for size in sorted(min(cut, len(data)) for cut in cuts):
        drain(size, ended=False)
    drain(len(data), ended=True)

    # Still "in a long line" at the end is fine: the ingester closes an ended run's drained file.
    assert offset == len(data)
    assert len(taken) == len(lines)
    for got, line in zip(taken, lines, strict=True):
        if len(line) <= 4097:
            assert got == line
        else:
            # Too long: taken as soon as it is known to be, possibly cut short, and dropped.
            assert line.startswith(got) and len(got) > 4097
            assert read_line(got) is Reason.TOO_LONG
