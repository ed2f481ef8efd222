"""The demo run `div serve --demo` starts: demo/train.py, laid out by demo/telemetry.toml."""

from __future__ import annotations

import subprocess
import sys

from django.conf import settings

from telemetry import runner, services
from telemetry.models import Run

DEMO_DIR = settings.BASE_DIR / "demo"


def start() -> tuple[Run, subprocess.Popen]:
    """The demo run, launched as `div run` launches one, and the process supervising it:
    the server stops it when it stops."""
    command = [sys.executable, "train.py"]
    run = services.run_launch(directory=DEMO_DIR, command=command)
    return run, runner.detach(run, command)
