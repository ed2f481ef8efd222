"""`div run DIR` ships DIR into the run's folder: what it copies, leaves out and refuses."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from telemetry.models import Run
from tests.conftest import ROOT, wait_for

TRAIN = "print('trained')\n"


@pytest.fixture
def project(tmp_path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "train.py").write_text(TRAIN)
    return folder


@pytest.fixture
def ship(div, home):
    """ship(directory, *command, cwd=..., **env) -> `div run DIR -- COMMAND` as a user types it."""

    def run(directory: str | Path, *command: str, cwd: Path = ROOT, **env: str):
        return subprocess.run(
            [sys.executable, "-m", "divergent", "run", str(directory), "--", *command],
            capture_output=True,
            text=True,
            env={**div.env, **env},
            cwd=cwd,
            timeout=120,
        )

    return run


def contents(runs: Path) -> list[str]:
    """What the runs' folder holds, hidden folders included."""
    return sorted(p.name for p in runs.iterdir()) if runs.exists() else []


def shipped(runs: Path, name: str) -> set[str]:
    files = runs / name / "files"
    return {p.relative_to(files).as_posix() for p in files.rglob("*")}


def test_div_run_dot_from_a_checkout_holding_divergent_home_leaves_the_home_out(ship, project):
    home = project / "var"  # the default: ./var in the checkout, shipped by `div run .`
    (home / "runs").mkdir(parents=True)
    (home / "notes.txt").write_text("kept in the home, never shipped\n")

    launched = ship(".", sys.executable, "train.py", cwd=project, DIVERGENT_HOME=str(home))

    assert launched.returncode == 0, launched.stderr
    assert "Traceback" not in launched.stderr
    note = "ship: left out var/, which is DIVERGENT_HOME: runs are never shipped"
    assert launched.stderr == note + "\n"
    run = Run.objects.get()
    assert shipped(home / "runs", run.name) == {"train.py"}
    assert (home / "runs" / run.name / "log").read_text().startswith(note + "\n")
    assert "trained" in launched.stdout
    assert contents(home / "runs") == [run.name]


def test_divignore_leaves_out_what_it_names(ship, project, home):
    (project / ".divignore").write_text("checkpoints/\n*.pt\n!best.pt\n")
    (project / "checkpoints").mkdir()
    (project / "checkpoints" / "step-1.bin").write_bytes(b"x" * 100)
    (project / "model.pt").write_bytes(b"x")
    (project / "best.pt").write_bytes(b"x")
    (project / "src").mkdir()
    (project / "src" / "model.pt").write_bytes(b"x")
    (project / "src" / "net.py").write_text("")

    launched = ship(project, sys.executable, "train.py")

    assert launched.returncode == 0, launched.stderr
    assert shipped(home / "runs", Run.objects.get().name) == {
        ".divignore",
        "best.pt",
        "src",
        "src/net.py",
        "train.py",
    }


def test_over_the_limit_the_run_is_refused_in_one_line_and_nothing_is_made(ship, project, home):
    (project / "model.bin").write_bytes(b"x" * 3_000)
    (project / "data").mkdir()
    (project / "data" / "x.npy").write_bytes(b"x" * 1_500)

    launched = ship(project, sys.executable, "train.py", DIVERGENT_SHIP_LIMIT="2kB")

    assert launched.returncode == 1
    assert launched.stdout == ""
    assert launched.stderr == (
        f"div: cannot ship {project}: its files come to 4.5 kB, over the 2 kB limit; "
        "the largest are model.bin (3 kB), data/x.npy (1.5 kB), train.py (17 bytes); "
        "name what the run does not need in .divignore, or raise DIVERGENT_SHIP_LIMIT\n"
    )
    assert not Run.objects.exists()
    assert contents(home / "runs") == []


def test_a_bad_ship_limit_is_one_line_saying_how_to_write_it(ship, project):
    launched = ship(project, sys.executable, "train.py", DIVERGENT_SHIP_LIMIT="lots")

    assert launched.returncode == 1
    assert launched.stderr == (
        'div: DIVERGENT_SHIP_LIMIT is "lots", which is not a size; '
        "write it like 100MB, 2GiB or 5000000 (bytes), or off\n"
    )
    assert not Run.objects.exists()


def test_fifos_sockets_and_devices_are_skipped_with_a_note_on_stderr_and_in_the_log(
    ship, project, home, tmp_path
):
    os.mkfifo(project / "queue")
    # A socket's path is limited to about 100 bytes: bind it from inside the folder.
    here = os.getcwd()
    listener = socket.socket(socket.AF_UNIX)
    try:
        os.chdir(project)
        listener.bind("agent.sock")
    finally:
        os.chdir(here)
    notes = [
        "ship: skipped agent.sock, a socket: only files, folders and links are shipped",
        "ship: skipped queue, a FIFO: only files, folders and links are shipped",
    ]
    try:
        os.mknod(project / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        notes.insert(1, "ship: skipped null, a device: only files, folders and links are shipped")
    except PermissionError:
        pass  # no CAP_MKNOD here: the FIFO and the socket still show the rule

    try:
        launched = ship(project, sys.executable, "train.py")
    finally:
        listener.close()

    assert launched.returncode == 0, launched.stderr
    assert launched.stderr == "".join(note + "\n" for note in notes)
    run = Run.objects.get()
    assert shipped(home / "runs", run.name) == {"train.py"}
    assert (
        (home / "runs" / run.name / "log")
        .read_text()
        .startswith("".join(note + "\n" for note in notes))
    )


def test_links_into_the_directory_point_into_the_copy_and_links_out_keep_their_target(
    ship, project, home, tmp_path
):
    outside = tmp_path / "datasets"
    outside.mkdir()
    (outside / "vocab.txt").write_text("a b c\n")
    (project / "configs").mkdir()
    (project / "configs" / "base.toml").write_text("lr = 3e-4\n")
    (project / "relative").symlink_to("configs/base.toml")
    (project / "absolute").symlink_to(project / "configs" / "base.toml")
    (project / "data").symlink_to(outside)
    (project / "up").symlink_to("../datasets/vocab.txt")

    launched = ship(project, sys.executable, "train.py")

    assert launched.returncode == 0, launched.stderr
    files = home / "runs" / Run.objects.get().name / "files"
    assert os.readlink(files / "relative") == "configs/base.toml"
    assert os.readlink(files / "absolute") == "configs/base.toml"  # into the copy, not DIR
    assert (files / "absolute").resolve() == (files / "configs" / "base.toml").resolve()
    assert os.readlink(files / "data") == str(outside)
    assert os.readlink(files / "up") == str(outside / "vocab.txt")
    assert (files / "up").read_text() == "a b c\n"
    assert launched.stderr == (
        f"ship: kept data as a link to {outside}, outside the directory: "
        "what it points at is not copied\n"
        f"ship: kept up as a link to {outside / 'vocab.txt'}, outside the directory: "
        "what it points at is not copied\n"
    )


def many_files(project: Path, count: int = 4000) -> None:
    folder = project / "many"
    folder.mkdir()
    for i in range(count):
        (folder / f"{i:05}.txt").write_bytes(b"x" * 512)


def filling(runs: Path) -> bool:
    """Whether a run's folder, whole or partial, has started to receive the shipped files."""
    return any(runs.glob("*/files/many/*")) or any(runs.glob(".*/files/many/*"))


def test_a_ship_stopped_by_ctrl_c_leaves_no_run_and_no_folder(div, project, home):
    many_files(project)
    launching = subprocess.Popen(
        [sys.executable, "-m", "divergent", "run", str(project), "--", "true"],
        env=div.env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: filling(home / "runs"), 60, "the copy to begin")
        launching.send_signal(signal.SIGINT)
        out, err = launching.communicate(timeout=60)
    finally:
        launching.kill()

    assert launching.returncode == 130
    assert "Traceback" not in err
    assert not Run.objects.exists()
    assert contents(home / "runs") == []


def test_a_ship_killed_halfway_is_cleared_away_by_the_next_one(ship, div, project, home, tmp_path):
    many_files(project)
    launching = subprocess.Popen(
        [sys.executable, "-m", "divergent", "run", str(project), "--", "true"],
        env=div.env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: filling(home / "runs"), 60, "the copy to begin")
    finally:
        launching.kill()
        launching.wait()
    small = tmp_path / "small"
    small.mkdir()
    (small / "train.py").write_text(TRAIN)

    launched = ship(small, sys.executable, "train.py")

    assert launched.returncode == 0, launched.stderr
    run = Run.objects.get()
    assert contents(home / "runs") == [run.name]
    assert shipped(home / "runs", run.name) == {"train.py"}
