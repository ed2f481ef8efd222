#!/usr/bin/env python
"""Django's command-line utility: `python manage.py telemetry …` is `div telemetry …`."""

if __name__ == "__main__":
    from divergent.cli import main

    main()
