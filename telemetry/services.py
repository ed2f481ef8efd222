"""Writes that touch several models, each atomic: the commands, ingester and tests call these."""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import secrets
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import orjson
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import default_token_generator
from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from telemetry import address, encryption, homes, live, processes, shipping, storage
from telemetry.errors import Refused
from telemetry.layout import MAX_FILE_BYTES, TOO_BIG, LayoutError, default_layout, parse_layout
from telemetry.lines import notice
from telemetry.listing import card_values, sparkline_pair
from telemetry.masking import MIN_LENGTH, Masker, too_plain, too_short
from telemetry.models import (
    Drop,
    Key,
    Layout,
    Membership,
    Org,
    Run,
    Secret,
    Sparkline,
    StatValue,
    Token,
)
from telemetry.names import SHOWN_PATH, SLUG, shown, slug
from telemetry.sealing import Sealing
from telemetry.sparkline import Spark
from telemetry.tailing import Mark
from telemetry.tally import KeyStats, Tally

ship_log = logging.getLogger("divergent.ship")

DEFAULT_ORG = "default"
FIRST_USER = "admin"
LAYOUT_FILE = "telemetry.toml"
NO_LAYOUT_FILE = "telemetry: cannot read {path}: {why}"
SECRET_TOO_SHORT = (
    f"a secret must be at least {MIN_LENGTH} characters: a shorter one would be masked wherever "
    "it appears, as lo would be in every loss; set the whole value"
)
SECRET_BLANK = (
    "a secret cannot be only whitespace: it would be masked in every indented line; "
    "set the value itself"
)
SECRET_NOT_TEXT = (
    "a secret must be UTF-8 text, as it is masked in the log's text; set the value itself "
    "(of binary data, its Base64)"
)
SECRET_ONE_CHARACTER = (
    "a secret cannot be one character repeated, like 00000000: it would be masked wherever "
    "the character runs that long; set the value itself"
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
        Membership.objects.get_or_create(org=org, user=user_named(username))
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
    return login_link(user=user_named(username), base=base)


def user_named(username: str):
    # A name no user can have is said so: "div user add a b makes one" would be refused too.
    user = get_user_model().objects.filter(username=slug(username, "a user", like="alice")).first()
    if user is None:
        raise Refused(NO_USER.format(name=username))
    return user


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
    shown_path = shown(str(path), most=SHOWN_PATH)
    try:
        # Opened without waiting (a FIFO would wait for a writer forever), read only if it is
        # a file, and never past the most a layout may be (/dev/zero never ends).
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            kind = stat.S_IFMT(os.fstat(f.fileno()).st_mode)
            if kind != stat.S_IFREG:
                why = NOT_A_FILE.get(kind, "is not a file")
                raise LayoutError(NO_LAYOUT_FILE.format(path=shown_path, why=why))
            data = f.read(MAX_FILE_BYTES + 1)
            size = max(len(data), os.fstat(f.fileno()).st_size)
        if size > MAX_FILE_BYTES:
            raise LayoutError(TOO_BIG.format(size=size, most=MAX_FILE_BYTES // 2**20))
        source = data.decode("utf-8-sig")  # a byte-order mark (Windows editors) stepped over
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else "not UTF-8 text"
        raise LayoutError(NO_LAYOUT_FILE.format(path=shown_path, why=why.lower())) from None
    return source, str(path)


# How a layout file that is not one is said: os.open takes them all, read or not.
NOT_A_FILE = {
    stat.S_IFDIR: "is a directory",
    stat.S_IFIFO: "is a FIFO, not a file",
    stat.S_IFCHR: "is a device, not a file",
    stat.S_IFBLK: "is a device, not a file",
    stat.S_IFSOCK: "is a socket, not a file",
}


def run_create(
    *,
    org: Org,
    command: list[str],
    layout_source: str = "",
    layout_origin: str = "",
    files_from: Path | None = None,
    creator=None,
    remote: bool = False,
) -> Run:
    """Validate the layout, ship the files, and create the run with its folder.

    Everything that can refuse the run (the layout, the ship's size and rules) is decided
    before anything is made; the files are copied into a partial folder that becomes the run's
    only once the copy is whole, so a refusal, an error or a Ctrl-C leaves no run and no folder.
    """
    parsed = parse_layout(layout_source) if layout_source else default_layout()
    plan = ship_plan(directory=files_from) if files_from is not None else None
    partial = folder_prepare(plan=plan, source=files_from)
    made = None
    try:
        with transaction.atomic():
            # Stored masked, the command and the layout (parsed from the file as written): the
            # API, the pages and the admin show them to the whole org. The process is given the
            # command itself by whoever runs it (runner.execute), never from here, and reads
            # its telemetry.toml, if at all, from its files as shipped.
            masker = masker_for(org.pk)
            run = Run.objects.create(
                org=org,
                command=masker.mask_args(command),
                home=homes.home_id(),
                creator=creator,
                remote=remote,
            )
            Layout.objects.create(
                run=run,
                source=masker.mask_text(layout_source),
                origin=masker.mask_text(layout_origin),
                parsed=masker.mask_json(parsed),
            )
            if run.folder.exists():
                # Left by a database since reset: no run of this one owns it.
                shutil.rmtree(run.folder)
            os.rename(partial, made := run.folder)
    except BaseException:
        for folder in (partial, made):
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
        raise
    if plan is not None and plan.notes:
        log_append(run, "".join(note + "\n" for note in plan.notes))
        for note in plan.notes:
            ship_log.warning("%s", note)
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
    if org is not None and not Org.objects.filter(name=slug(org, "an org")).exists():
        raise Refused(NO_ORG.format(name=org))
    with launch_refusals(directory):
        source, origin = layout_read(directory=directory, telemetry=telemetry)
        return run_create(
            org=org_get_or_create(name=org or DEFAULT_ORG),
            command=command,
            layout_source=source,
            layout_origin=origin,
            files_from=directory,
        )


@contextmanager
def launch_refusals(directory: Path) -> Iterator[None]:
    """What reading the layout and shipping the directory can go wrong with, as the one
    `div: ...` line each: the same for a run launched here and one launched to a server."""
    try:
        yield
    except LayoutError as e:
        raise Refused(REFUSED.format(why=e)) from None
    except shipping.ShipError as e:
        raise Refused(str(e)) from None
    except shutil.Error as e:  # copytree's: every file it could not copy, with why
        why = e.args[0][0][2]
        raise Refused(CANNOT_SHIP.format(path=directory, why=why)) from None
    except OSError as e:
        raise Refused(CANNOT_SHIP.format(path=directory, why=e.strerror or e)) from None


def folder_prepare(*, plan: shipping.Plan | None, source: Path | None) -> Path:
    """A run's folder built aside (partial): the shipped files, an empty telemetry file and
    log. Nothing is left of it if the copy fails; the caller renames it into place."""
    partial = _partial_folder()
    try:
        _ship(plan, source, partial / "files")
        (partial / "telemetry.jsonl").touch()
        (partial / "log").touch()
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return partial


NO_ORG_OF_YOURS = 'you have no org "{name}"; yours: {orgs}'
WHICH_ORG = "name the run's org with --org; yours: {orgs}"


def org_for_run(*, user, name: str | None) -> Org:
    """The org a user's run goes to: the one named, if the user is a member of it; else
    default if they are a member of it, else their only org. Another org's name is refused as
    one that does not exist: it says nothing of the orgs of others."""
    theirs = list(Org.objects.filter(membership__user=user).order_by("name"))
    names = ", ".join(org.name for org in theirs) or "none, ask to be added to one"
    if name is not None:
        for org in theirs:
            if org.name == name:
                return org
        raise Refused(NO_ORG_OF_YOURS.format(name=name, orgs=names))
    for org in theirs:
        if org.name == DEFAULT_ORG:
            return org
    if len(theirs) == 1:
        return theirs[0]
    raise Refused(WHICH_ORG.format(orgs=names))


@transaction.atomic
def run_open(
    *,
    user,
    org: str | None,
    command: list[str],
    layout_source: str,
    layout_origin: str,
    host: str,
    pid: int,
) -> Run:
    """A run made over the API for a `div run` on another machine: its files are uploaded
    here (receiving.py), its supervisor is that `div`, heard from by its uploads and beats.
    The layout is parsed here, as for any run; a refusal leaves nothing made."""
    if not command:
        raise Refused(NO_COMMAND)
    the_org = org_for_run(user=user, name=org)
    try:
        run = run_create(
            org=the_org,
            command=command,
            layout_source=layout_source,
            layout_origin=layout_origin,
            creator=user,
            remote=True,
        )
    except LayoutError as e:
        raise Refused(REFUSED.format(why=e)) from None
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(
        started=now, heartbeat=now, supervisor_host=host, supervisor_pid=pid
    )
    run.started = run.heartbeat = now
    run.supervisor_host, run.supervisor_pid = host, pid
    return run


def run_reopen(*, run: Run) -> None:
    """New bytes for a run whose telemetry was closed (lost while its client was away): its
    ingester reads on from where it stopped, and closes it again at the end."""
    if Run.objects.filter(pk=run.pk, telemetry_closed=True).update(telemetry_closed=False):
        run.telemetry_closed = False
        live.notify_status(run.pk, run.status, False)


def ship_plan(*, directory: Path) -> shipping.Plan:
    """What shipping the directory copies, or ShipError with the one line to show."""
    root = directory.resolve()
    divignore = root / shipping.DIVIGNORE
    try:
        ignore = divignore.read_text(encoding="utf-8") if divignore.is_file() else ""
    except (OSError, UnicodeDecodeError) as e:
        raise shipping.ShipError(f"cannot read {divignore}: {_why(e)}") from None
    left_out = []
    for folder in (settings.DIVERGENT_HOME, settings.RUNS_DIR):
        folder = Path(folder).resolve()
        if folder.is_relative_to(root):
            left_out.append(folder.relative_to(root).as_posix())
    rules = shipping.Rules(
        root=root.as_posix(),
        divignore=ignore,
        left_out=left_out,
        limit=shipping.parse_limit(settings.SHIP_LIMIT),
        name=str(directory),
    )
    return rules.plan(_listing(root, rules, directory))


def _listing(root: Path, rules: shipping.Rules, named: Path) -> list[shipping.Entry]:
    """Everything under root, links not followed, folders the rules leave out not entered."""
    entries: list[shipping.Entry] = []
    folders = [""]
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(root / folder) as found:
                listed = sorted(found, key=lambda e: e.name)
        except OSError as e:
            raise shipping.ShipError(f"cannot ship {named}: {folder}: {_why(e)}") from None
        for item in listed:
            path = f"{folder}/{item.name}" if folder else item.name
            mode = item.stat(follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                entries.append(shipping.Entry(path, shipping.DIR))
                if rules.descends(path):
                    folders.append(path)
            elif stat.S_ISLNK(mode):
                entries.append(shipping.Entry(path, shipping.LINK, target=os.readlink(item.path)))
            elif stat.S_ISREG(mode):
                size = item.stat(follow_symlinks=False).st_size
                entries.append(shipping.Entry(path, shipping.FILE, size))
            else:
                kind = shipping.FIFO if stat.S_ISFIFO(mode) else shipping.SOCKET
                if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
                    kind = shipping.DEVICE
                entries.append(shipping.Entry(path, kind))
    return sorted(entries, key=lambda e: e.path)


def _ship(plan: shipping.Plan | None, source: Path | None, into: Path) -> None:
    into.mkdir()
    if plan is None or source is None:
        return
    source = source.resolve()
    try:
        for folder in plan.dirs:
            (into / folder).mkdir()
        for entry in plan.files:
            # copy2 refuses a FIFO that took a file's place since the listing: it never blocks.
            shutil.copy2(source / entry.path, into / entry.path, follow_symlinks=False)
        for path, target in plan.links:
            os.symlink(target, into / path)
        for folder in reversed(plan.dirs):  # modes and times, once nothing more is written
            shutil.copystat(source / folder, into / folder, follow_symlinks=False)
    except OSError as e:
        where = e.filename or source
        raise shipping.ShipError(f"cannot ship {source}: {where}: {_why(e)}") from None


def _why(error: OSError | UnicodeDecodeError) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror.lower()
    return "not UTF-8 text" if isinstance(error, UnicodeDecodeError) else str(error)


PARTIAL = ".partial-{host}-"  # then the pid of the process filling it


def _partial_folder() -> Path:
    """A hidden folder beside the runs' to build a run's folder in; any left by a process of
    this machine that has gone (killed while copying) are removed first."""
    settings.RUNS_DIR.mkdir(parents=True, exist_ok=True)
    host = processes.this_host()
    prefix = PARTIAL.format(host=host)
    for leftover in settings.RUNS_DIR.glob(prefix + "*"):
        pid = leftover.name.removeprefix(prefix).partition("-")[0]
        if pid.isdigit() and processes.alive_here(host, int(pid)) is False:
            shutil.rmtree(leftover, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=settings.RUNS_DIR))


def run_start(*, run: Run) -> None:
    run.started = timezone.now()
    run.save(update_fields=["started"])


LOST_NOTE = (
    "div: {run} was lost: its supervisor ({who}) went without recording how the command "
    "ended (killed, or its machine restarted); its telemetry is read to the end and closed\n"
)


@transaction.atomic
def run_heartbeat(
    *,
    run_id: int,
    host: str,
    pid: int,
    started: int | None = None,
    command: tuple[int, int | None] | None = None,
) -> None:
    """The supervisor says it is there: its host, pid and start time, and once it runs, its
    command's (pid, start time). A lost run whose own supervisor speaks again goes on running,
    its telemetry read again from where it was left. A run whose command's end is recorded is
    heard from no more: its host, pid and last heartbeat stay as they were."""
    said = {"command_pid": command[0], "command_started": command[1]} if command else {}
    Run.objects.filter(pk=run_id, exit_code__isnull=True).update(
        heartbeat=timezone.now(),
        supervisor_host=host,
        supervisor_pid=pid,
        supervisor_started=started,
        **said,
    )
    back = Run.objects.filter(
        pk=run_id, status=Run.Status.LOST, supervisor_host=host, supervisor_pid=pid
    ).update(status=Run.Status.RUNNING, ended=None, telemetry_closed=False)
    if back:
        transaction.on_commit(lambda: live.notify_status(run_id, Run.Status.RUNNING, False))


def run_lose(*, run: Run) -> bool:
    """End a live run whose supervisor has gone as lost; False when it was heard from, or
    ended, since it was judged. Its end is when it was last heard from."""
    with transaction.atomic():
        lost = Run.objects.filter(
            pk=run.pk,
            status=Run.Status.RUNNING,
            heartbeat=run.heartbeat,
            supervisor_pid=run.supervisor_pid,
        ).update(status=Run.Status.LOST, ended=_last_heard(run))
    if not lost:
        return False
    run.refresh_from_db()
    who = f"pid {run.supervisor_pid} on {run.supervisor_host}" if run.supervisor_pid else "none"
    log_append(run, LOST_NOTE.format(run=run.name, who=who))
    live.notify_status(run.pk, run.status, run.telemetry_closed)
    return True


def _last_heard(run: Run):
    """When a lost run was last known to be going: its last heartbeat, never before it started."""
    known = [moment for moment in (run.heartbeat, run.started) if moment is not None]
    return max(known) if known else timezone.now()


def run_finish(*, run: Run, exit_code: int) -> None:
    """Record how the command ended. It stands even if the run was judged lost meanwhile (its
    supervisor was slow, not gone): the telemetry is then read on from where it was closed.

    Written from the values, not from the run object, which a follower may be refreshing in
    another thread while this waits for the database."""
    status = Run.Status.SUCCEEDED if exit_code == 0 else Run.Status.FAILED
    ended = timezone.now()
    with transaction.atomic():
        Run.objects.filter(pk=run.pk, status=Run.Status.LOST).update(telemetry_closed=False)
        Run.objects.filter(pk=run.pk).update(exit_code=exit_code, status=status, ended=ended)
        closed = Run.objects.filter(pk=run.pk).values_list("telemetry_closed", flat=True).get()
        transaction.on_commit(lambda: live.notify_status(run.pk, status, closed))
    run.exit_code, run.status, run.ended, run.telemetry_closed = exit_code, status, ended, closed


class SecretRefused(Refused):
    """A value that cannot be a secret; str() is the one-line reason."""


def secret_seal(*, value: str) -> str:
    """The value encrypted for storing; SecretRefused for a value too short or too plain to mask
    (masking.too_plain), and SecretsKeyError for a key that cannot read the secrets already
    stored (secrets encrypted with two keys would leave one set unreadable)."""
    try:
        value.encode("utf-8")  # a lone surrogate: bytes on stdin that were not UTF-8
    except UnicodeEncodeError:
        raise SecretRefused(SECRET_NOT_TEXT) from None
    if too_short(value):
        raise SecretRefused(SECRET_TOO_SHORT)
    if too_plain(value):
        raise SecretRefused(SECRET_BLANK if value.isspace() else SECRET_ONE_CHARACTER)
    stored = Secret.objects.values_list("sealed", flat=True).first()
    if stored is not None:
        encryption.unseal(stored)
    return encryption.seal(value)


def secret_set(*, org: Org, name: str, value: str) -> None:
    sealed = secret_seal(value=value)
    Secret.objects.update_or_create(org=org, name=name, defaults={"sealed": sealed})


def secret_name_check(*, name: str) -> str:
    """The name, when a run's environment can carry it; Refused saying why otherwise. Asked by
    `div secrets set` and the admin alike."""
    if not SECRET_NAME.fullmatch(name):
        raise Refused(BAD_SECRET_NAME.format(name=name))
    return name


def secrets_org(*, name: str, user=None) -> Org:
    """The org whose secrets `div secrets` works on, alike on the server and over the API: for
    a token's user, one they are a member of; for the server's own `div`, any org there is, and
    `default` (where a run without --org goes), made when first named. Any other is refused in
    the same words, naming the orgs there are to choose from (a user's own: another's org is as
    if it did not exist). `div secrets` never makes an org: `div org add` does."""
    orgs = Org.objects.all() if user is None else Org.objects.filter(membership__user=user)
    found = orgs.filter(name=slug(name, "an org")).first()
    if found is None and user is None and name == DEFAULT_ORG:
        found = org_get_or_create()
    if found is None:
        names = ", ".join(orgs.order_by("name").values_list("name", flat=True)) or "none"
        raise Refused(NO_ORG_OF_YOURS.format(name=name, orgs=names))
    return found


@transaction.atomic
def secret_put(*, org: str, name: str, value: str, user=None) -> None:
    """`div secrets set`: a secret of an org (secrets_org), once name and value are ones a
    run's environment can carry."""
    secret_name_check(name=name)
    if not value:
        raise Refused(NO_SECRET_VALUE)
    secret_set(org=secrets_org(name=org, user=user), name=name, value=value)


def secret_delete(*, org: str, name: str, user=None) -> None:
    deleted, _ = Secret.objects.filter(org=secrets_org(name=org, user=user), name=name).delete()
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
    # from each never interleave. The log's lock keeps a note out of a remote run's upload,
    # which records where its bytes went (receiving.py).
    with open(run.log_path, "a", encoding="utf-8") as log:
        fcntl.flock(log, fcntl.LOCK_EX)
        log.write(text)


def ingest_batch(
    *,
    run: Run,
    tally: Tally,
    offset: int,
    in_long_line: bool,
    close: bool,
    mark: Mark | None = None,
    notes: Sequence[str] = (),
) -> None:
    """Store what the tally took since it last settled, with the file offset, atomically.

    A killed ingester resumes from the stored offset against the stored stats: every line is
    stored once, none twice. Points are stored whole until their window of chunks.WINDOW
    points is complete; then, in the same transaction, the window is sealed by key into chunks
    and overviews (docs/storage.md), as is the last window when the telemetry closes. The mark
    (which file the offset counts bytes of) is stored with it, so a file rotated meanwhile is
    known for another; notes go to the run's log after.
    """
    points = tally.new_points
    marked = {}
    if mark is not None:
        marked = {
            "telemetry_inode": mark.inode,
            "telemetry_head": mark.head,
            "telemetry_problem": mark.problem,
            "telemetry_after": mark.after,
        }
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
        sparkline_keep(run=run, tally=tally)
        if tally.changed:
            Key.objects.bulk_create(
                [_key_row(run, tally.keys[name]) for name in tally.changed],
                update_conflicts=True,
                unique_fields=["run", "name"],
                update_fields=["count", "last", "min", "max", "passed_over", "first_passed_seq"],
            )
            stat_values_store(run=run, layout=sealing.layout, tally=tally)
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
            **marked,
        )
    run.sealed = sealing.sealed
    run.offset, run.points, run.in_long_line, run.telemetry_closed = (
        offset,
        tally.points,
        in_long_line,
        close,
    )
    for field, value in marked.items():
        setattr(run, field, value)
    said = [notice(reason) + "\n" for reason in tally.first_drops] + list(notes)
    if said:
        log_append(run, "".join(said))
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


# ---- API tokens --------------------------------------------------------------------------

TOKEN_PREFIX = "div_"  # says what a token is wherever one turns up (a log, a paste)
TOKEN_TOUCH = timedelta(minutes=1)  # last_used is written at most this often
TOKEN_TAKEN = '{user} already has a token "{name}"; give another --name, or revoke that one first'
NO_TOKEN = '{user} has no token "{name}"; div token list shows them'


def token_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogateescape")).hexdigest()


@transaction.atomic
def token_create(*, user, name: str | None = None) -> tuple[Token, str]:
    """A new token of the user's and its text, which is shown this once: only its digest is
    kept. Without a name, the first of token-1, token-2, ... the user has not used."""
    if name is None:
        taken = set(Token.objects.filter(user=user).values_list("name", flat=True))
        name = next(f"token-{n}" for n in range(1, len(taken) + 2) if f"token-{n}" not in taken)
    slug(name, "a token", like="laptop")
    if Token.objects.filter(user=user, name=name).exists():
        raise Refused(TOKEN_TAKEN.format(user=user.username, name=name))
    text = TOKEN_PREFIX + secrets.token_urlsafe(32)
    return Token.objects.create(user=user, name=name, digest=token_digest(text)), text


def token_revoke(*, user, name: str) -> None:
    # A name no token can have (a NUL, which PostgreSQL's text cannot hold) is looked up nowhere.
    if not SLUG.fullmatch(name) or not Token.objects.filter(user=user, name=name).delete()[0]:
        raise Refused(NO_TOKEN.format(user=user.username, name=name))


def token_used(*, token: Token) -> None:
    """Note that the token was used: at most once a minute, not a write per request."""
    now = timezone.now()
    if token.last_used is None or now - token.last_used > TOKEN_TOUCH:
        Token.objects.filter(pk=token.pk).update(last_used=now)
        token.last_used = now


def stat_values_store(*, run: Run, layout: dict, tally: Tally) -> None:
    """The values of the run's stat cards whose keys the batch changed, where the dashboard
    sorts by them: called by ingest_batch in the transaction that stores the key stats, so a
    card's sort value is never behind the value it shows."""
    stats = layout.get("stats") or []
    if not any(stat["y"] in tally.changed for stat in stats):
        return

    def value_of(y: str, reduce: str):
        key = tally.keys.get(y)
        return getattr(key, reduce) if key is not None and y in tally.changed else None

    rows = [
        StatValue(run=run, title=title, value=value)
        for title, value in card_values(layout, value_of).items()
        if value is not None
    ]
    StatValue.objects.bulk_create(
        rows, update_conflicts=True, unique_fields=["run", "title"], update_fields=["value"]
    )


def sparkline_keep(*, run: Run, tally: Tally) -> None:
    """Take the batch into the run's sparkline and store what it draws: called by ingest_batch
    in the transaction that stores the points, after their windows are sealed."""
    sealing = tally.sealing
    pair = sparkline_pair(sealing.layout, list(tally.keys))
    if pair is None or pair[0] not in tally.keys:
        return
    if sealing.spark is None or sealing.spark.pair != pair:
        sealing.spark = Spark(pair)
    spark = sealing.spark
    if not spark.take(sealing.overviews.get(pair), sealing.sealed, sealing.unsealed):
        return
    # A key whose points carry no x yet is stored as a line of no point: the row says so, and
    # reads this row rather than the run's points, as for any run ingested since rows are kept.
    line = spark.line() or ([], [])
    y, x = pair
    kept = Sparkline(run=run, y=y, x=x, upto=spark.taken, line=orjson.dumps(line).decode())
    Sparkline.objects.bulk_create(
        [kept],
        update_conflicts=True,
        unique_fields=["run"],
        update_fields=["y", "x", "upto", "line"],
    )
