"""The people and runs of the API and websocket tests, as healthchecks' hc/test.py has them.

Alice is a member of "acme", where the runs are. Bob is her teammate in "acme" and sees what
she sees. Eve is an outsider in "other": every run of acme is a 404 to her, or a websocket
closed with 4403.

Runs get their points the real way: lines appended to run-N/telemetry.jsonl, then the
ingester's `tail_once()`.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from telemetry import services
from telemetry.ingest import Ingester
from telemetry.models import Run

# The spec's example telemetry.toml, with a stat for each way of reducing a key.
LAYOUT = textwrap.dedent(
    """\
    x = "step"

    [[panel]]
    title = "Loss"
    y = ["loss", "eval_loss"]
    scale = "log"

    [[panel]]
    title = "F1"
    y = ["eval_strict_f1", "eval_typed_f1"]
    min = 0.9
    max = 1.0
    rule = 0.95

    [[panel]]
    y = "eval_leak_recall"
    wide = true

    [[stat]]
    title = "Samples/s"
    y = "eval_samples_per_second"
    reduce = "last"

    [[stat]]
    y = "loss"
    reduce = "min"

    [[stat]]
    title = "Worst loss"
    y = "loss"
    reduce = "max"
    """
)


class Telemetry:
    """A run's telemetry file, written to as a training script does and ingested as the server
    does. One Ingester per run: it holds the run's lease, which another would wait 15 s for."""

    def __init__(self, run: Run):
        self.run = run
        self.ingester = Ingester(run_ids=[run.pk])

    def write(self, *lines: dict | str) -> None:
        """Append lines: a dict as json.dumps writes it (NaN included), a str as it is."""
        with open(self.run.telemetry_path, "a", encoding="utf-8") as f:
            for line in lines:
                f.write((line if isinstance(line, str) else json.dumps(line)) + "\n")

    def ingest(self) -> None:
        """Store every whole line written so far (and close the telemetry of an ended run)."""
        while self.ingester.tail_once():
            pass
        self.run.refresh_from_db()

    def finish(self, exit_code: int = 0) -> None:
        """The run's process exits; the ingester then stores the rest and closes its telemetry."""
        self.run.refresh_from_db()
        services.run_finish(run=self.run, exit_code=exit_code)
        self.ingest()


@pytest.fixture
def example_layout() -> str:
    return LAYOUT


@pytest.fixture
def acme(db):
    return services.org_get_or_create(name="acme")


@pytest.fixture
def alice(acme):
    """A member of acme, the org the runs are in."""
    return services.user_create(username="alice", orgs=["acme"])


@pytest.fixture
def bob(acme):
    """Alice's teammate: also in acme, so he sees her runs."""
    return services.user_create(username="bob", orgs=["acme"])


@pytest.fixture
def eve(db):
    """An outsider: a member of another org only."""
    return services.user_create(username="eve", orgs=["other"])


@pytest.fixture
def make_run(home, acme):
    """make_run(layout="") -> a Telemetry for a new run of acme, launched with that layout."""

    def make(layout: str = "") -> Telemetry:
        run = services.run_create(
            org=acme,
            command=["python", "train.py"],
            layout_source=layout,
            layout_origin="telemetry.toml" if layout else "",
        )
        return Telemetry(run)

    return make


@pytest.fixture
def shown(make_run, example_layout):
    """A run launched with the spec's example layout, three points in and a line dropped."""
    telemetry = make_run(example_layout)
    telemetry.write(
        {"step": 1, "loss": 2.0},
        {"step": 2, "loss": 0.5, "eval_loss": 0.9, "eval_samples_per_second": 120.5},
        "not json at all",
        {"step": 3, "loss": 1.25, "eval_samples_per_second": 98},
    )
    telemetry.ingest()
    return telemetry.run


@pytest.fixture
def small(make_run):
    """A run with no layout: four points, one without step, one with a key the others lack."""
    telemetry = make_run()
    telemetry.write(
        {"step": 10, "loss": 1.0},
        {"step": 20, "loss": 0.5, "acc": 0.1},
        {"loss": 0.25},
        {"step": 40, "loss": 0.125},
    )
    telemetry.ingest()
    return telemetry.run
