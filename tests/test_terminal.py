"""The log as a terminal draws it (telemetry/terminal.py): what a carriage return leaves, and
styles in place of escape codes."""

from __future__ import annotations

import pytest

from telemetry.terminal import Screen, last_state_start, line_state, spans

TQDM = "".join(f"\rEpoch 0: {i:3d}%|{'#' * (i // 10):<10}| {i}/100" for i in range(0, 101, 5))


@pytest.mark.parametrize(
    "line, shown",
    [
        (TQDM, "Epoch 0: 100%|##########| 100/100"),
        ("downloading\r", "downloading"),  # a return not yet followed by the next state
        ("a\rbb\r\r", "bb"),
        ("plain", "plain"),
        ("\r", ""),
    ],
)
def test_a_carriage_return_rewrites_its_line_and_only_the_last_state_shows(line, shown):
    assert line_state(line) == shown


def test_the_last_state_of_a_line_being_written_starts_after_its_last_return():
    assert last_state_start("a\rbb\rccc") == 5
    assert last_state_start(b"a\rbb\rccc\r") == 5
    assert last_state_start("no return") == 0


def test_colours_and_bold_become_styles():
    assert spans("\x1b[32mINFO\x1b[0m ready \x1b[1;31mfailed\x1b[0m") == [
        ["INFO", {"fg": 2}],
        [" ready ", None],
        ["failed", {"fg": 1, "b": 1}],
    ]


def test_256_and_true_colours_become_their_own_colour():
    assert spans("\x1b[38;5;208ma\x1b[48;2;16;32;48mb") == [
        ["a", {"fg": "#ff8700"}],
        ["b", {"fg": "#ff8700", "bg": "#102030"}],
    ]


@pytest.mark.parametrize(
    "line",
    [
        "\x1b[2Kdone",  # erase the line
        "\x1b[Adone",  # cursor up, as a multi-bar tqdm writes
        "\x1b]0;a title\x07done",  # the window's title
        "do\x07ne",  # a bell
        "\x1b[?25ldone\x1b[?25h",  # hide and show the cursor
        "\x1bPq#0;2;0;0;0#1;2;100;100;0\x1b\\done",  # a DCS (sixel graphics), body and all
        "\x1b_an APC\x1b\\do\x1b^a PM\x1b\\ne",  # application and privacy strings
        "\x1b#8\x1b%Gdone",  # escapes with intermediates: screen alignment, UTF-8
        "\x1b[>4;1mdone",  # xterm's modifyOtherKeys: a private CSI ending in m, not a colour
        "\x1b(B\x1b[mdone",  # ncurses' sgr0: the ASCII character set, then reset
        "done\x1b[",  # a CSI cut short at the end of what has been written so far
        "done\x1b[38;5",
        "done\x1b",
        "done\x1b]0;a tit",  # the window's title, cut short
        "done\x1bP1$r",  # a DCS, cut short
        "do\x1b[1;2\x1b[mne",  # a CSI cut short by the next escape
    ],
)
def test_other_escape_sequences_and_control_characters_are_dropped(line):
    assert spans(line) == [["done", None]]


def test_a_colour_set_before_a_carriage_return_is_still_on_for_what_is_written_after_it():
    assert spans("\x1b[32mA\rB") == [["B", {"fg": 2}]]
    assert spans("\x1b[1m\x1b[31m 10%\r\x1b[22m 20%\r 30%") == [[" 30%", {"fg": 1}]]
    assert spans("\x1b[33mwarn\r\x1b[0mdone") == [["done", None]]


def test_a_colour_set_in_a_state_written_over_carries_to_the_next_line():
    screen = Screen()

    assert [screen.spans(line) for line in ["\x1b[36m 50%\r100%", "next"]] == [
        [["100%", {"fg": 6}]],
        [["next", {"fg": 6}]],
    ]


def test_a_colour_left_on_carries_to_the_next_line_as_on_a_terminal():
    screen = Screen()

    assert [screen.spans(line) for line in ["\x1b[33mwarn", "still", "\x1b[0mplain"]] == [
        [["warn", {"fg": 3}]],
        [["still", {"fg": 3}]],
        [["plain", None]],
    ]
