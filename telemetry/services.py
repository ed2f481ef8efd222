"""Writes that touch several models, each atomic: the commands, ingester and tests call these."""

from __future__ import annotations

import shutil
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import default_token_generator
from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from telemetry import live, storage
from telemetry.layout import LayoutError, default_layout, parse_layout
from telemetry.lines import notice
from telemetry.masking import Masker
from telemetry.models import Drop, Key, Layout, Membership, Org, Run, Secret
from telemetry.sealing import Sealing
from telemetry.tally import KeyStats, Tally

DEFAULT_ORG = "default"
DEFAULT_URL = "http://127.0.0.1:8000"
LAYOUT_FILE = "telemetry.toml"
UNKNOWN_RUN = 'there is no run "{name}"; div telemetry lists the runs'
NO_LAYOUT_FILE = "telemetry: cannot read {path}: {why}"


def org_get_or_create(*, name: str = DEFAULT_ORG) -> Org:
    org, _ = Org.objects.get_or_create(name=name)
    return org


@transaction.atomic
def user_create(*, username: str, orgs: list[str], staff: bool = False):
    """A user with no password, a member of each org: they log in with a one-time link."""
    user = get_user_model().objects.create_user(username=username, password=None)
    if staff:
        user.is_staff = user.is_superuser = True
        user.save(update_fields=["is_staff", "is_superuser"])
    for name in orgs:
        Membership.objects.create(org=org_get_or_create(name=name), user=user)
    return user


def login_link(*, user, base: str = DEFAULT_URL) -> str:
    """A link that logs the user in once: logging in changes what the token was made from."""
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    token = default_token_generator.make_token(user)
    return base.rstrip("/") + reverse("login-link", args=[uid, token])


def run_by_name(name: str) -> Run:
    """run-7 or 7 -> the run, or LookupError with the message to show."""
    run = Run.objects.named(name).select_related("org").first()
    if run is None:
        raise LookupError(UNKNOWN_RUN.format(name=name))
    return run


def layout_read(*, directory: Path | None, telemetry: Path | None) -> tuple[str, str]:
    """The layout file a run is launched with: (source, origin), or LayoutError when it cannot
    be read; run_create parses it. ("", "") is the default layout.

    --telemetry names the file; else telemetry.toml at the top of the shipped directory.
    """
    path = telemetry if telemetry is not None else (directory / LAYOUT_FILE if directory else None)
    if path is None or (telemetry is None and not path.exists()):
        return "", ""
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else "not UTF-8 text"
        raise LayoutError(NO_LAYOUT_FILE.format(path=path, why=why.lower())) from None
    return source, str(path)


@transaction.atomic
def run_create(
    *,
    org: Org,
    command: list[str],
    layout_source: str = "",
    layout_origin: str = "",
    files_from: Path | None = None,
) -> Run:
    """Validate the layout, create the run with it, and lay out its folder.

    The layout is parsed here, before anything is made, so no run exists with a layout that
    cannot be read: a LayoutError leaves nothing behind.
    """
    parsed = parse_layout(layout_source) if layout_source else default_layout()
    run = Run.objects.create(org=org, command=command)
    Layout.objects.create(run=run, source=layout_source, origin=layout_origin, parsed=parsed)
    run.folder.mkdir(parents=True, exist_ok=True)
    if files_from is not None:
        shutil.copytree(files_from, run.files_path, symlinks=True, dirs_exist_ok=True)
    else:
        run.files_path.mkdir(exist_ok=True)
    run.telemetry_path.touch()
    run.log_path.touch()
    return run


def run_start(*, run: Run) -> None:
    run.started = timezone.now()
    run.save(update_fields=["started"])


def run_finish(*, run: Run, exit_code: int) -> None:
    run.exit_code = exit_code
    run.status = Run.Status.SUCCEEDED if exit_code == 0 else Run.Status.FAILED
    run.ended = timezone.now()
    run.save(update_fields=["exit_code", "status", "ended"])
    transaction.on_commit(lambda: live.notify_status(run.pk, run.status, run.telemetry_closed))


def secret_set(*, org: Org, name: str, value: str) -> None:
    Secret.objects.update_or_create(org=org, name=name, defaults={"value": value})


def secret_delete(*, org: Org, name: str) -> bool:
    deleted, _ = Secret.objects.filter(org=org, name=name).delete()
    return bool(deleted)


def masker_for(org_id: int) -> Masker:
    return Masker(Secret.objects.filter(org_id=org_id).values_list("value", flat=True))


def tally_load(*, run: Run) -> Tally:
    keys = {
        k.name: KeyStats(
            k.name, k.order, k.count, k.last, k.min, k.max, k.passed_over, k.first_passed_seq
        )
        for k in Key.objects.filter(run=run).order_by("order")
    }
    drops = dict(Drop.objects.filter(run=run).values_list("reason", "count"))
    return Tally(keys=keys, points=run.points, drops=drops, sealing=_sealing_load(run, keys))


def _sealing_load(run: Run, keys: dict[str, KeyStats]) -> Sealing:
    names: dict[int, str | None] = {stats.order: name for name, stats in keys.items()}
    names[storage.SEQ] = None
    return Sealing(
        layout=Layout.objects.filter(run=run).values_list("parsed", flat=True).first()
        or default_layout(),
        sealed=run.sealed,
        unsealed=storage.tail(run.pk, after=run.sealed),
        overviews={
            (names[y_no], names[x_no]): summary
            for (y_no, x_no), (summary, _) in storage.overviews(run.pk).items()
        },
    )


def log_append(run: Run, text: str) -> None:
    # One write per call with O_APPEND: the runner writes to the same log, and whole lines
    # from each never interleave.
    with open(run.log_path, "a", encoding="utf-8") as log:
        log.write(text)


def ingest_batch(*, run: Run, tally: Tally, offset: int, in_long_line: bool, close: bool) -> None:
    """Store what the tally took since it last settled, with the file offset, atomically.

    A killed ingester resumes from the stored offset against the stored stats: every line is
    stored once, none twice. Points are stored whole until their window of chunks.WINDOW
    points is complete; then, in the same transaction, the window is sealed by key into chunks
    and overviews (docs/storage.md), as is the last window when the telemetry closes.
    """
    points = tally.new_points
    if tally.sealing is None:
        tally.sealing = _sealing_load(run, tally.keys)
    sealing = tally.sealing
    windows = sealing.take(points, close=close)
    with transaction.atomic():
        # A point whose window is complete now is sealed at once, never stored whole.
        fresh = points[max(0, sealing.sealed + 1 - points[0][0]) :] if points else []
        storage.tail_append(run.pk, fresh)
        if windows:
            key_nos = {name: stats.order for name, stats in tally.keys.items()}
            storage.seal(run.pk, sealing=sealing, windows=windows, key_nos=key_nos)
        if tally.changed:
            Key.objects.bulk_create(
                [_key_row(run, tally.keys[name]) for name in tally.changed],
                update_conflicts=True,
                unique_fields=["run", "name"],
                update_fields=["count", "last", "min", "max", "passed_over", "first_passed_seq"],
            )
        if tally.drops:
            Drop.objects.bulk_create(
                [Drop(run=run, reason=r, count=n) for r, n in tally.drops.items()],
                update_conflicts=True,
                unique_fields=["run", "reason"],
                update_fields=["count"],
            )
        Run.objects.filter(pk=run.pk).update(
            offset=offset,
            points=tally.points,
            sealed=sealing.sealed,
            in_long_line=in_long_line,
            telemetry_closed=close,
        )
    run.sealed = sealing.sealed
    run.offset, run.points, run.in_long_line, run.telemetry_closed = (
        offset,
        tally.points,
        in_long_line,
        close,
    )
    if tally.first_drops:
        log_append(run, "".join(notice(reason) + "\n" for reason in tally.first_drops))
    if points:
        live.notify_points(run.pk, points, tally.points)
    if close:
        live.notify_status(run.pk, run.status, True)
    tally.settle()


def _key_row(run: Run, stats: KeyStats) -> Key:
    return Key(
        run=run,
        name=stats.name,
        order=stats.order,
        count=stats.count,
        last=stats.last,
        min=stats.min,
        max=stats.max,
        passed_over=stats.passed_over,
        first_passed_seq=stats.first_passed_seq,
    )
