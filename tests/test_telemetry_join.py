"""`div telemetry run-3,run-7 ...`: several runs printed together, their points joined on x;
the same bytes from this machine's database and from the server's API."""

# ruff: noqa: F811  (fixtures imported by name, as in test_remote_cli.py)

from __future__ import annotations

import io
import sys
import textwrap

from telemetry import reading, services, sources
from telemetry.models import Run
from tests.browser import stop
from tests.conftest import wait_for
from tests.personas import Telemetry
from tests.remote import Machine, closed, project, remote, start  # noqa: F401  (fixtures)

NAN = float("nan")
# A Trainer's run: loss and eval_loss at one step on two lines, a restart from a checkpoint
# that writes step 100 again, a point without step, a line that is not JSON, a NaN.
TRAINER = [
    {"step": 100, "loss": 2.31},
    {"step": 100, "eval_loss": 1.88},
    {"step": 200, "loss": 1.2},
    "not json",
    {"step": 100, "loss": 2.0},
    {"epoch": 1, "loss": 0.9},
    {"step": 300, "loss": NAN},
]
# Another run at other steps, one of them a float.
OTHER = [
    {"step": 150, "loss": 1.5, "lr": 0.001},
    {"step": 200, "loss": 1.1},
    {"step": 250.5, "loss": 1.0},
]
NO_STEP = [{"loss": 0.7}, {"loss": 0.6}]  # a run that writes no step


def finished(org: str, lines) -> str:
    """A run of the org whose telemetry file holds these lines, ended and ingested."""
    telemetry = Telemetry(
        services.run_create(org=services.org_get_or_create(name=org), command=["t"])
    )
    telemetry.write(*lines)
    telemetry.finish()
    return telemetry.run.name


def made(org: str = "acme") -> dict[str, str]:
    return {"a": finished(org, TRAINER), "b": finished(org, OTHER), "c": finished(org, NO_STEP)}


def expected(a: str, b: str, c: str) -> list[tuple[list[str], str, str, int]]:
    """(arguments, stdout, stderr, exit code) of each form, for runs a, b and c."""
    col = max(len(a), len(b))
    dropped = f"telemetry: {a}: dropped a line that is not JSON; write one JSON object per line\n"
    nan_at = f"telemetry: {a}: loss: 1 value passed over as NaN or Infinity, first at step 300\n"
    left_out = f"telemetry: {a}: 1 point without step left out of the join\n"
    return [
        (
            [f"{a},{b}"],
            f"{'run':<{col}}  key        count  last     min      max\n"
            f"{a:<{col}}  step       5      300      100      300\n"
            f"{a:<{col}}  loss       4      0.9      0.9      2.31\n"
            f"{a:<{col}}  eval_loss  1      1.88     1.88     1.88\n"
            f"{a:<{col}}  epoch      1      1        1        1\n"
            f"{b:<{col}}  step       3      250.5    150      250.5\n"
            f"{b:<{col}}  loss       3      1.0      1.0      1.5\n"
            f"{b:<{col}}  lr         1      0.001    0.001    0.001\n",
            dropped + nan_at,
            0,
        ),
        (
            [f"{a},{b}", "loss", "eval_loss"],
            f"step\t{a}.loss\t{a}.eval_loss\t{b}.loss\t{b}.eval_loss\n"
            "100\t2.31\t1.88\t\t\n"  # the loss line and the eval_loss line: one row
            "100\t2.0\t\t\t\n"  # the restart's value kept, on a row of its own
            "150\t\t\t1.5\t\n"
            "200\t1.2\t\t1.1\t\n"
            "250.5\t\t\t1.0\t\n",
            f'telemetry: {b} has no key "eval_loss" yet; its column is empty; did you mean loss?\n'
            + left_out
            + dropped
            + nan_at,
            0,
        ),
        (
            [f"{a},{b}", "--csv"],
            f"step,{a}.loss,{a}.eval_loss,{a}.epoch,{b}.loss,{b}.lr\n"
            "100,2.31,1.88,,,\n"
            "100,2.0,,,,\n"
            "150,,,,1.5,0.001\n"
            "200,1.2,,,1.1,\n"
            "250.5,,,,1.0,\n"
            "300,,,,,\n",  # the whole CSV keeps the point that carries only x
            left_out + dropped + nan_at,
            0,
        ),
        (
            [f"{a},{b}", "loss", "--json"],
            f'{{"run": "{a}", "seq": 1, "data": {{"step": 100, "loss": 2.31}}}}\n'
            f'{{"run": "{a}", "seq": 3, "data": {{"step": 200, "loss": 1.2}}}}\n'
            f'{{"run": "{a}", "seq": 4, "data": {{"step": 100, "loss": 2.0}}}}\n'
            f'{{"run": "{a}", "seq": 5, "data": {{"loss": 0.9}}}}\n'
            f'{{"run": "{b}", "seq": 1, "data": {{"step": 150, "loss": 1.5}}}}\n'
            f'{{"run": "{b}", "seq": 2, "data": {{"step": 200, "loss": 1.1}}}}\n'
            f'{{"run": "{b}", "seq": 3, "data": {{"step": 250.5, "loss": 1.0}}}}\n',
            dropped + nan_at,
            0,
        ),
        (
            [f"{a},{b}", "loss", "--x", "epoch"],
            f"epoch\t{a}.loss\t{b}.loss\n1\t0.9\t\n",
            f'telemetry: {b} has no key "epoch" yet; its column is empty\n'
            f"telemetry: {a}: 3 points without epoch left out of the join\n"
            + dropped
            + f"telemetry: {a}: loss: 1 value passed over as NaN or Infinity\n"
            f"telemetry: {b}: 3 points without epoch left out of the join\n",
            0,
        ),
        (
            [f"{a},{c}", "loss"],  # c writes no step: the points' places in their runs
            f"seq\t{a}.loss\t{c}.loss\n1\t2.31\t0.7\n2\t\t0.6\n3\t1.2\t\n4\t2.0\t\n5\t0.9\t\n",
            dropped
            + f"telemetry: {a}: loss: 1 value passed over as NaN or Infinity, first at point 6\n",
            0,
        ),
        (
            [f"{a},{a}", "loss"],  # a list is a join, even of one run named twice
            f"step\t{a}.loss\n100\t2.31\n100\t2.0\n200\t1.2\n",
            left_out + dropped + nan_at,
            0,
        ),
        (
            [f"{b},run-999999", "loss"],  # never a partial join
            "",
            'div: there is no run "run-999999"; div telemetry lists the runs\n',
            1,
        ),
    ]


def test_several_runs_print_joined_in_every_form(div):
    names = made()

    for args, stdout, stderr, code in expected(**names):
        done = div("telemetry", *args)
        assert (done.stdout, done.stderr, done.returncode) == (stdout, stderr, code), args


def test_a_remote_join_prints_the_same_bytes_as_on_the_server(div, tmp_path):
    names, foreign = made(), finished("other", OTHER)
    served = start(div, tmp_path)  # with alice of acme, and eve of other
    try:
        server, gpu = Machine(tmp_path, div.env), served.machine("alice")
        # The same strings test_several_runs_print_joined_in_every_form reads from the database.
        for args, stdout, stderr, code in expected(**names):
            there = gpu("telemetry", *args)
            assert (there.stdout, there.stderr, there.returncode) == (stdout, stderr, code), args
        assert (
            gpu("telemetry", names["a"], "loss").stdout
            == server("telemetry", names["a"], "loss").stdout
        )  # and one run as it always was

        theirs = gpu("telemetry", f"{names['a']},{foreign}", "loss")
        assert (theirs.stdout, theirs.stderr, theirs.returncode) == (
            "",
            f'div: there is no run "{foreign}"; div telemetry lists the runs\n',
            1,
        )
    finally:
        stop(served.server.process)
    assert "Traceback" not in served.server.said()


# ---- following -------------------------------------------------------------------------------


class Rounds:
    """The pause between rounds of a follow, run in this process: it notes what was printed by
    then, and does the next thing the runs do."""

    def __init__(self, out: io.StringIO, *steps):
        self.out, self.steps, self.seen = out, list(steps), []

    def __call__(self, pause: float) -> None:
        self.seen.append(self.out.getvalue())
        self.steps.pop(0)()


def live(lines) -> Telemetry:
    telemetry = Telemetry(services.run_create(org=services.org_get_or_create(), command=["t"]))
    telemetry.write(*lines)
    telemetry.ingest()
    return telemetry


def follow(runs: list[Telemetry], keys: list[str], form: str | None, *steps):
    out, err = io.StringIO(), io.StringIO()
    rounds = Rounds(out, *steps)
    names = tuple(t.run.name for t in runs)
    reading.telemetry(
        sources.Local(), names, keys, x=None, form=form, follow=True, out=out, err=err, wait=rounds
    )
    return out.getvalue(), err.getvalue(), rounds


def then(telemetry: Telemetry, *lines, end: bool = False):
    def step():
        telemetry.write(*lines)
        telemetry.finish() if end else telemetry.ingest()

    return step


def test_following_runs_prints_a_row_once_every_run_going_has_passed_it(db, home):
    first = live([{"step": 1, "loss": 0.5}, {"step": 2, "loss": 0.4}, {"step": 3, "loss": 0.3}])
    second = live([{"step": 1, "loss": 0.9}])
    a, b = first.run.name, second.run.name

    printed, said, rounds = follow(
        [first, second],
        ["loss"],
        None,
        then(first, {"step": 4, "loss": 0.2}, end=True),  # the first run ends first
        then(second, {"step": 2, "loss": 0.8}),
        then(second, {"step": 3, "loss": 0.7}, {"step": 5, "loss": 0.6}, end=True),
    )

    header = f"step\t{a}.loss\t{b}.loss\n"
    assert rounds.seen == [
        header,  # the second run is at step 1: a point at 1 may still come
        header,  # the first has ended; the second is still at 1
        header + "1\t0.5\t0.9\n",  # the second has passed 1
    ]
    assert printed == header + (
        "1\t0.5\t0.9\n2\t0.4\t0.8\n3\t0.3\t0.7\n4\t0.2\t\n5\t\t0.6\n"  # both ended: the rest
    )
    assert said == ""
    assert rounds.steps == []  # one pause a round, not one a run: three pauses, four rounds


def test_following_runs_as_json_prints_each_rounds_new_points_run_by_run(db, home):
    first, second = live([{"step": 1, "loss": 0.5}]), live([{"step": 1, "loss": 0.9}])
    a, b = first.run.name, second.run.name

    printed, said, rounds = follow(
        [first, second],
        [],
        "json",
        then(second, {"step": 2, "loss": 0.8}, end=True),
        then(first, {"step": 2, "loss": 0.4}, end=True),
    )

    lines = [
        f'{{"run": "{a}", "seq": 1, "data": {{"step": 1, "loss": 0.5}}}}\n',
        f'{{"run": "{b}", "seq": 1, "data": {{"step": 1, "loss": 0.9}}}}\n',
        f'{{"run": "{b}", "seq": 2, "data": {{"step": 2, "loss": 0.8}}}}\n',
        f'{{"run": "{a}", "seq": 2, "data": {{"step": 2, "loss": 0.4}}}}\n',
    ]
    assert rounds.seen == ["".join(lines[:2]), "".join(lines[:3])]
    assert (printed, said) == ("".join(lines), "")


# Writes `steps` points of loss = factor / step; with `hold`, waits for a file named go before
# that step.
PACED = textwrap.dedent(
    """\
    import json, os, sys, time
    steps, factor = int(sys.argv[1]), float(sys.argv[2])
    hold = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    with open(os.environ["DIVERGENT_TELEMETRY_PATH"], "a") as f:
        for step in range(1, steps + 1):
            if step == hold:
                deadline = time.monotonic() + 60
                while not os.path.exists("go") and time.monotonic() < deadline:
                    time.sleep(0.02)
            f.write(json.dumps({"step": step, "loss": factor / step}) + "\\n")
            f.flush()
    """
)


def test_following_two_runs_where_one_ends_first_prints_the_same_join_here_and_remotely(
    div, remote, tmp_path
):
    folder = project(tmp_path, PACED)
    server, gpu = Machine(tmp_path, div.env), remote.machine("alice")
    launch = ["run", str(folder), "--org", "acme", "--detach", "--", sys.executable, "train.py"]
    first = server(*launch, "4", "1").stdout.strip()
    second = server(*launch, "3", "2", "3").stdout.strip()  # holds before its step 3
    closed(first)
    held = Run.objects.get(pk=int(second.removeprefix("run-")))
    wait_for(lambda: Run.objects.get(pk=held.pk).points == 2, what="the second run's 2 points")

    args = ["telemetry", f"{first},{second}", "loss", "-f"]
    followers = [server.popen(*args), gpu.popen(*args)]
    try:
        header = f"step\t{first}.loss\t{second}.loss\n".encode()
        for follower in followers:
            assert follower.stdout.readline() == header
            assert follower.stdout.readline() == b"1\t1.0\t2.0\n"  # the second has passed 1
            assert follower.poll() is None, "follow stopped while a run goes on"
        (held.files_path / "go").touch()
        for follower in followers:
            rest, said = follower.communicate(timeout=30)
            assert rest == (b"2\t0.5\t1.0\n3\t0.3333333333333333\t0.6666666666666666\n4\t0.25\t\n")
            assert (said, follower.returncode) == (b"", 0)
    finally:
        for follower in followers:
            follower.kill()


def test_the_help_says_how_runs_are_joined(div):
    shown = div("telemetry", "--help")

    assert " ".join(shown.stdout.split()).startswith(
        "Usage: div telemetry [OPTIONS] [RUN] [KEYS]... "
        "Prints the runs, a run's keys, or its points. "
        "Runs joined by commas (run-3,run-7; each once, up to 20) are printed together. Their "
        "points are one table: a column for each run and key (run-3.loss), the rows joined on x "
        "(--x, else step when every run wrote it, else seq) and sorted by it. A run with no point "
        "at an x has an empty cell there; a point without x is left out, counted on stderr. With "
        'no keys, the key table gets a first column, run. --json adds "run" to each point, run '
        "by run. -f follows every run until all have ended, printing a row once every run still "
        "going has passed its x. Options:"
    )
