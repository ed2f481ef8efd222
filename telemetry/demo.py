"""The demo run `div serve --demo` starts: demo/train.py, laid out by demo/telemetry.toml."""

from __future__ import annotations

import subprocess
import sys

from django.conf import settings

from telemetry import runner, services
from telemetry.models import Run

DEMO_DIR = settings.BASE_DIR / "demo"


def start() -> tuple[Run, subprocess.Popen]:
    """The demo run, and the process supervising it: the server stops it when it stops."""
    source, origin = services.layout_read(directory=DEMO_DIR, telemetry=None)
    command = [sys.executable, "train.py"]
    run = services.run_create(
        org=services.org_get_or_create(),
        command=command,
        layout_source=source,
        layout_origin=origin,
        files_from=DEMO_DIR,
    )
    return run, runner.detach(run, command)
