"""A UTF-8 byte-order mark is stepped over at the start of the telemetry file, and only there:
elsewhere a line that starts with one is not JSON."""

from __future__ import annotations

import json

from telemetry import queries
from telemetry.lines import BOM, Reason, read_line

pytest_plugins = ["tests.personas"]


def append(run, data: bytes) -> None:
    with open(run.telemetry_path, "ab") as f:
        f.write(data)


def points(run) -> list[dict]:
    return [data for _, data in queries.points(run.pk)]


def drops(run) -> dict[str, int]:
    return dict(run.drops.values_list("reason", "count"))


def test_a_mark_at_the_start_of_the_file_keeps_the_first_line(make_run):
    telemetry = make_run()
    append(telemetry.run, BOM + b'{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.0}\n')

    telemetry.ingest()

    assert points(telemetry.run) == [{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.0}]
    assert drops(telemetry.run) == {}


def test_a_file_written_as_windows_tools_write_it_loses_no_line(make_run):
    telemetry = make_run()
    for step in (1, 2):
        # Python's utf-8-sig, like PowerShell's utf8, marks a new file and not what is appended.
        with open(telemetry.run.telemetry_path, "a", encoding="utf-8-sig") as f:
            f.write(json.dumps({"step": step}) + "\n")

    telemetry.finish()

    assert points(telemetry.run) == [{"step": 1}, {"step": 2}]
    assert drops(telemetry.run) == {}


def test_a_mark_written_a_byte_at_a_time_is_waited_for(make_run):
    telemetry = make_run()
    append(telemetry.run, BOM[:2])
    telemetry.ingest()
    assert telemetry.run.offset == 0

    append(telemetry.run, BOM[2:] + b'{"step": 1}\n')
    telemetry.ingest()

    assert points(telemetry.run) == [{"step": 1}]
    assert drops(telemetry.run) == {}


def test_a_file_that_is_only_a_mark_closes_with_no_points(make_run):
    telemetry = make_run()
    append(telemetry.run, BOM)

    telemetry.finish()

    assert telemetry.run.telemetry_closed
    assert (points(telemetry.run), drops(telemetry.run)) == ([], {})


def test_a_mark_past_the_start_of_the_file_is_not_json(make_run):
    telemetry = make_run()
    append(telemetry.run, b'{"step": 1}\n' + BOM + b'{"step": 2}\n{"step": 3}\n')

    telemetry.ingest()

    assert points(telemetry.run) == [{"step": 1}, {"step": 3}]
    assert drops(telemetry.run) == {"not_json": 1}


def test_a_second_mark_at_the_start_of_the_file_is_not_json(make_run):
    telemetry = make_run()
    append(telemetry.run, BOM + BOM + b'{"step": 1}\n{"step": 2}\n')

    telemetry.ingest()

    assert points(telemetry.run) == [{"step": 2}]
    assert drops(telemetry.run) == {"not_json": 1}


def test_a_line_that_starts_with_a_mark_is_not_json_on_its_own():
    assert read_line(BOM + b'{"step": 1}') is Reason.NOT_JSON
