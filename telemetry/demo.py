"""The demo run `div serve --demo` starts: demo/train.py, laid out by demo/telemetry.toml."""

from __future__ import annotations

import sys

from django.conf import settings

from telemetry import runner, services
from telemetry.models import Run

DEMO_DIR = settings.BASE_DIR / "demo"


def start() -> Run:
    source, origin, _ = services.layout_read(directory=DEMO_DIR, telemetry=None)
    run = services.run_create(
        org=services.org_get_or_create(),
        command=[sys.executable, "train.py"],
        layout_source=source,
        layout_origin=origin,
        files_from=DEMO_DIR,
    )
    runner.detach(run)
    return run
