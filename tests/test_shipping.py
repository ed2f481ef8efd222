"""The rules of shipping a directory (telemetry/shipping.py): what is copied, given a listing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from telemetry import shipping
from telemetry.shipping import Entry, Rules, ShipError, parse_limit

ROOT = "/home/alice/project"


def plan(entries, **rules):
    return Rules(root=ROOT, **rules).plan(entries)


def test_divergent_home_inside_the_directory_is_left_out_with_its_contents_and_noted():
    shipped = plan(
        [
            Entry("train.py", "file", 10),
            Entry("var", "dir"),
            Entry("var/divergent.sqlite3", "file", 10**9),
            Entry("var/runs/run-1/files/train.py", "file", 10),
        ],
        left_out=["var", "var/runs"],
        limit=100,
    )

    assert [f.path for f in shipped.files] == ["train.py"]
    assert shipped.dirs == []
    assert shipped.notes == ["ship: left out var/, which is DIVERGENT_HOME: runs are never shipped"]
    assert Rules(root=ROOT, left_out=["var"]).descends("var") is False
    assert Rules(root=ROOT, left_out=["var"]).descends("variants") is True


def test_divignore_leaves_out_what_it_names_in_gitignore_syntax():
    rules = dict(divignore="# big things\ncheckpoints/\n*.pt\n!best.pt\n/data\n")
    shipped = plan(
        [
            Entry("checkpoints", "dir"),
            Entry("checkpoints/step-100.bin", "file", 5),
            Entry("model.pt", "file", 5),
            Entry("best.pt", "file", 5),
            Entry("data", "dir"),
            Entry("src", "dir"),
            Entry("src/data", "dir"),
            Entry("src/data/vocab.txt", "file", 5),
            Entry("src/train.py", "file", 5),
        ],
        **rules,
    )

    assert [f.path for f in shipped.files] == ["best.pt", "src/data/vocab.txt", "src/train.py"]
    assert shipped.dirs == ["src", "src/data"]
    assert shipped.notes == []
    assert Rules(root=ROOT, **rules).descends("checkpoints") is False
    assert Rules(root=ROOT, **rules).descends("src/data") is True


def test_fifos_sockets_and_devices_are_skipped_with_a_note_each():
    shipped = plan(
        [
            Entry("queue", "fifo"),
            Entry("agent.sock", "socket"),
            Entry("null", "device"),
            Entry("train.py", "file", 3),
        ]
    )

    assert [f.path for f in shipped.files] == ["train.py"]
    assert shipped.notes == [
        "ship: skipped queue, a FIFO: only files, folders and links are shipped",
        "ship: skipped agent.sock, a socket: only files, folders and links are shipped",
        "ship: skipped null, a device: only files, folders and links are shipped",
    ]


def test_a_thousand_sockets_make_a_few_notes_not_a_thousand():
    shipped = plan([Entry(f"s{i}.sock", "socket") for i in range(1000)])

    assert len(shipped.notes) == shipping.NOTES_SHOWN + 1
    assert shipped.notes[-1] == "ship: skipped 990 more FIFOs, sockets or devices"


@pytest.mark.parametrize(
    "path, target, written, outside",
    [
        ("latest", "runs/best.ckpt", "runs/best.ckpt", False),  # relative, inside: as written
        ("src/cfg", "../configs/base.toml", "../configs/base.toml", False),
        ("abs", f"{ROOT}/configs/base.toml", "configs/base.toml", False),  # made relative
        ("src/abs", f"{ROOT}/configs", "../configs", False),
        ("data", "/mnt/datasets/imagenet", "/mnt/datasets/imagenet", True),  # outside: kept
        ("up", "../shared/vocab.txt", "/home/alice/shared/vocab.txt", True),  # made absolute
        ("sibling", "/home/alice/project2/x", "/home/alice/project2/x", True),  # not a prefix
    ],
)
def test_links_stay_links_into_the_copy_or_out_to_the_same_place(path, target, written, outside):
    shipped = plan([Entry(path, "link", target=target)])

    assert shipped.links == [(path, written)]
    assert shipped.files == [] and shipped.size == 0
    assert bool(shipped.notes) is outside
    if outside:
        assert shipped.notes == [
            f"ship: kept {path} as a link to {written}, outside the directory: "
            "what it points at is not copied"
        ]


def test_over_the_limit_the_ship_is_refused_naming_the_largest_files():
    with pytest.raises(ShipError) as refused:
        plan(
            [
                Entry("train.py", "file", 2_000),
                Entry("data/x.npy", "file", 30_100_000),
                Entry("model.bin", "file", 120_000_000),
                Entry("notes.txt", "file", 2_100_000),
                Entry("ignored.bin", "file", 10**12),
            ],
            divignore="ignored.bin\n",
            limit=100_000_000,
            name="./project",
        )

    assert str(refused.value) == (
        "cannot ship ./project: its files come to 152.2 MB, over the 100 MB limit; "
        "the largest are model.bin (120 MB), data/x.npy (30.1 MB), notes.txt (2.1 MB); "
        "name what the run does not need in .divignore, or raise DIVERGENT_SHIP_LIMIT"
    )


def test_at_the_limit_exactly_the_ship_goes_ahead():
    assert plan([Entry("a", "file", 100)], limit=100).size == 100


@pytest.mark.parametrize(
    "value, limit",
    [
        ("100MB", 100_000_000),
        ("100 mb", 100_000_000),
        ("100M", 100_000_000),
        ("2GiB", 2 * 2**30),
        ("1.5GB", 1_500_000_000),
        ("512kB", 512_000),
        ("64KiB", 65_536),
        ("5000000", 5_000_000),
        ("0", 0),
        ("off", None),
        ("OFF", None),
        ("none", None),
    ],
)
def test_the_limit_is_written_as_a_size_with_a_unit(value, limit):
    assert parse_limit(value) == limit


@pytest.mark.parametrize("value", ["", "lots", "100 MBs", "-5", "1e9", "100 megabytes", "MB"])
def test_a_bad_limit_is_one_line_saying_how_to_write_it(value):
    with pytest.raises(ShipError) as bad:
        parse_limit(value)

    assert str(bad.value) == (
        f'DIVERGENT_SHIP_LIMIT is "{value}", which is not a size; '
        "write it like 100MB, 2GiB or 5000000 (bytes), or off"
    )


@given(st.text())
def test_any_limit_text_is_a_size_or_the_one_line_error(value):
    try:
        limit = parse_limit(value)
    except ShipError as e:
        assert "\n" not in str(e)
    else:
        assert limit is None or limit >= 0
