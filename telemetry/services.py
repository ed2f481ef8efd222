"""Writes that touch several models, each atomic: the commands, ingester and tests call these."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import orjson
from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import default_token_generator
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from telemetry import address, encryption, live
from telemetry.errors import Refused
from telemetry.layout import LayoutError, default_layout, parse_layout
from telemetry.lines import notice
from telemetry.masking import MIN_LENGTH, Masker, too_short
from telemetry.models import Drop, Key, Layout, Membership, Org, Point, Run, Secret
from telemetry.names import slug
from telemetry.tally import KeyStats, Tally

DEFAULT_ORG = "default"
FIRST_USER = "admin"
LAYOUT_FILE = "telemetry.toml"
NO_LAYOUT_FILE = "telemetry: cannot read {path}: {why}"
SECRET_TOO_SHORT = (
    f"a secret must be at least {MIN_LENGTH} characters: a shorter one would be masked wherever "
    "it appears, as lo would be in every loss; set the whole value"
)

# What a refusal says, in one place: the tests reuse them.
REFUSED = "the API refused the run: {why}"
NO_COMMAND = "give the command to run after --, like: div run . -- python train.py"
NOT_A_DIRECTORY = "{path} is not a directory; name the directory to ship"
CANNOT_SHIP = "cannot ship {path}: {why}"
NO_ORG = 'there is no org "{name}"; div org add {name} makes it'
NO_USER = 'there is no user "{name}"; div user add {name} makes one'
USER_TAKEN = 'there is already a user "{name}"; div user link {name} prints a new login link'
SECRET_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
BAD_SECRET_NAME = (
    "{name} cannot be an environment variable; use letters, digits and _, like HF_TOKEN"
)
NO_SECRET_VALUE = (
    'no value on stdin; pipe it in, like: printf %s "$TOKEN" | div secrets set ORG NAME'
)
NO_SECRET = 'org {org} has no secret "{name}"'


def org_get_or_create(*, name: str = DEFAULT_ORG) -> Org:
    org, _ = Org.objects.get_or_create(name=slug(name, "an org"))
    return org


@transaction.atomic
def org_add(*, name: str, members: list[str] = ()) -> Org:
    """The org (made if new), with each user a member of it; a user that does not exist
    refuses the whole of it."""
    org = org_get_or_create(name=name)
    for username in members:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise Refused(NO_USER.format(name=username))
        Membership.objects.get_or_create(org=org, user=user)
    return org


@transaction.atomic
def user_create(*, username: str, orgs: list[str], staff: bool = False):
    """A user with no password, a member of each org: they log in with a one-time link."""
    users = get_user_model().objects
    if users.filter(username=slug(username, "a user", like="alice")).exists():
        raise Refused(USER_TAKEN.format(name=username))
    user = users.create_user(username=username, password=None)
    if staff:
        user.is_staff = user.is_superuser = True
        user.save(update_fields=["is_staff", "is_superuser"])
    for name in orgs:
        Membership.objects.create(org=org_get_or_create(name=name), user=user)
    return user


def user_add(*, username: str, orgs: list[str], base: str | None = None) -> str:
    """A new user in their orgs (default: the org default), and their one-time login link."""
    return login_link(user=user_create(username=username, orgs=orgs or [DEFAULT_ORG]), base=base)


def user_link(*, username: str, base: str | None = None) -> str:
    """A new one-time login link for a user."""
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise Refused(NO_USER.format(name=username))
    return login_link(user=user, base=base)


@transaction.atomic
def user_first():
    """The first user of a server with none: an admin in the org default, for /admin/ too;
    None when there are users already."""
    if get_user_model().objects.exists():
        return None
    return user_create(username=FIRST_USER, orgs=[DEFAULT_ORG], staff=True)


def login_link(*, user, base: str | None = None) -> str:
    """A link that logs the user in once: logging in changes what the token was made from.
    Its address is the server's public one unless another is given."""
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    token = default_token_generator.make_token(user)
    return (base or address.public_url()).rstrip("/") + reverse("login-link", args=[uid, token])


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
    # Stored masked: the API, the run page and the admin show it. The process is given the
    # command itself by whoever runs it (runner.execute), never from here.
    run = Run.objects.create(org=org, command=masker_for(org.pk).mask_args(command))
    Layout.objects.create(run=run, source=layout_source, origin=layout_origin, parsed=parsed)
    run.folder.mkdir(parents=True, exist_ok=True)
    if files_from is not None:
        shutil.copytree(files_from, run.files_path, symlinks=True, dirs_exist_ok=True)
    else:
        run.files_path.mkdir(exist_ok=True)
    run.telemetry_path.touch()
    run.log_path.touch()
    return run


@transaction.atomic
def run_launch(
    *, directory: Path, command: list[str], telemetry: Path | None = None, org: str | None = None
) -> Run:
    """What `div run` and the demo launch: the directory checked, the layout read and parsed,
    the run created and its files shipped, in one transaction. A refusal leaves no run, and no
    default org made for it."""
    if not command:
        raise Refused(NO_COMMAND)
    if not directory.is_dir():
        raise Refused(NOT_A_DIRECTORY.format(path=directory))
    if org is not None and not Org.objects.filter(name=org).exists():
        raise Refused(NO_ORG.format(name=org))
    try:
        source, origin = layout_read(directory=directory, telemetry=telemetry)
        return run_create(
            org=org_get_or_create(name=org or DEFAULT_ORG),
            command=command,
            layout_source=source,
            layout_origin=origin,
            files_from=directory,
        )
    except LayoutError as e:
        raise Refused(REFUSED.format(why=e)) from None
    except shutil.Error as e:  # copytree's: every file it could not copy, with why
        why = e.args[0][0][2]
        raise Refused(CANNOT_SHIP.format(path=directory, why=why)) from None
    except OSError as e:
        raise Refused(CANNOT_SHIP.format(path=directory, why=e.strerror or e)) from None


def run_start(*, run: Run) -> None:
    run.started = timezone.now()
    run.save(update_fields=["started"])


def run_finish(*, run: Run, exit_code: int) -> None:
    run.exit_code = exit_code
    run.status = Run.Status.SUCCEEDED if exit_code == 0 else Run.Status.FAILED
    run.ended = timezone.now()
    run.save(update_fields=["exit_code", "status", "ended"])
    transaction.on_commit(lambda: live.notify_status(run.pk, run.status, run.telemetry_closed))


class SecretRefused(Refused):
    """A value that cannot be a secret; str() is the one-line reason."""


def secret_seal(*, value: str) -> str:
    """The value encrypted for storing; SecretRefused for a value too short to mask, and
    SecretsKeyError for a key that cannot read the secrets already stored (secrets encrypted
    with two keys would leave one set unreadable)."""
    if too_short(value):
        raise SecretRefused(SECRET_TOO_SHORT)
    stored = Secret.objects.values_list("sealed", flat=True).first()
    if stored is not None:
        encryption.unseal(stored)
    return encryption.seal(value)


def secret_set(*, org: Org, name: str, value: str) -> None:
    sealed = secret_seal(value=value)
    Secret.objects.update_or_create(org=org, name=name, defaults={"sealed": sealed})


@transaction.atomic
def secret_put(*, org: str, name: str, value: str) -> None:
    """`div secrets set`: a secret by its org's name (made if new), once name and value are
    ones a run's environment can carry."""
    if not SECRET_NAME.fullmatch(name):
        raise Refused(BAD_SECRET_NAME.format(name=name))
    if not value:
        raise Refused(NO_SECRET_VALUE)
    secret_set(org=org_get_or_create(name=org), name=name, value=value)


def secret_delete(*, org: str, name: str) -> None:
    deleted, _ = Secret.objects.filter(org__name=org, name=name).delete()
    if not deleted:
        raise Refused(NO_SECRET.format(org=org, name=name))


def secrets_of(org_id: int) -> dict[str, str]:
    """The org's secrets by name, decrypted; SecretsKeyError when this key cannot read them,
    never an empty dict that would leave them unmasked."""
    return {s.name: s.reveal() for s in Secret.objects.filter(org_id=org_id).order_by("name")}


def masker_for(org_id: int) -> Masker:
    return Masker(secrets_of(org_id).values())


def tally_load(*, run: Run) -> Tally:
    keys = {
        k.name: KeyStats(
            k.name, k.order, k.count, k.last, k.min, k.max, k.passed_over, k.first_passed_seq
        )
        for k in Key.objects.filter(run=run).order_by("order")
    }
    drops = dict(Drop.objects.filter(run=run).values_list("reason", "count"))
    return Tally(keys=keys, points=run.points, drops=drops)


def log_append(run: Run, text: str) -> None:
    # One write per call with O_APPEND: the runner writes to the same log, and whole lines
    # from each never interleave.
    with open(run.log_path, "a", encoding="utf-8") as log:
        log.write(text)


def ingest_batch(*, run: Run, tally: Tally, offset: int, in_long_line: bool, close: bool) -> None:
    """Store what the tally took since it last settled, with the file offset, atomically.

    A killed ingester resumes from the stored offset against the stored stats: every line is
    stored once, none twice.
    """
    points = tally.new_points
    with transaction.atomic():
        if points:
            with connection.cursor() as cursor:
                cursor.executemany(
                    f"INSERT INTO {Point._meta.db_table} (run_id, seq, data) VALUES (%s, %s, %s)",
                    [(run.pk, seq, orjson.dumps(numbers).decode()) for seq, numbers in points],
                )
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
            offset=offset, points=tally.points, in_long_line=in_long_line, telemetry_closed=close
        )
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
