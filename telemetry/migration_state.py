"""How far this machine's database is set up: what a reader checks before it reads anything."""

from __future__ import annotations

import importlib.util
import pkgutil

from django.apps import apps
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder


def unapplied() -> int | None:
    """How many of the installed apps' migrations the database lacks; None when it has none at
    all. The files are counted, not imported: Django's migration loader would cost every read
    tens of milliseconds."""
    recorder = MigrationRecorder(connection)
    applied = set(recorder.applied_migrations()) if recorder.has_table() else set()
    if not applied:
        return None
    missing = 0
    for app in apps.get_app_configs():
        spec = importlib.util.find_spec(f"{app.name}.migrations")
        if spec is None or not spec.submodule_search_locations:
            continue
        for module in pkgutil.iter_modules(spec.submodule_search_locations):
            # As Django's loader: _private and ~backup names are not migrations.
            if not module.ispkg and module.name[0] not in "_~":
                missing += (app.label, module.name) not in applied
    return missing


def database_named() -> str:
    """A PostgreSQL database as its user finds it: its name and server, never a password."""
    db = connection.settings_dict
    host, port = db.get("HOST") or "localhost", db.get("PORT") or 5432
    return f"the PostgreSQL database {db['NAME']} on {host}:{port}"
