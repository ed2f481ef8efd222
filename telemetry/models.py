from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import models
from django.utils import timezone

from telemetry import encryption
from telemetry.names import RUN_NAME, run_number  # noqa: F401  (what names a run: pure, in names.py)


class Org(models.Model):
    name = models.SlugField(max_length=100, unique=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership")

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    org = models.ForeignKey(Org, models.CASCADE)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "user"], name="one_membership_per_user_and_org")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.org}"


class SealedField(models.TextField):
    """A secret's value encrypted (telemetry/encryption.py). It answers no lookup at all: no
    filter, exclude or admin query string can ask anything of it, not even of its length."""

    def get_lookup(self, lookup_name):
        return None

    def get_transform(self, lookup_name):
        return None


class Secret(models.Model):
    org = models.ForeignKey(Org, models.CASCADE, related_name="secrets")
    name = models.CharField(max_length=200)
    sealed = SealedField()

    def reveal(self) -> str:
        """The value; SecretsKeyError when this machine's key cannot decrypt it."""
        return encryption.unseal(self.sealed)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "name"], name="one_secret_per_name_and_org")
        ]

    def __str__(self) -> str:
        # Never the value: this is what the admin and the logs show.
        return f"{self.org}/{self.name}"


# A run is visible to the members of its org: the one lookup behind visible_to and viewers.
VIEWER = "org__membership__user"


def search_text(command: list) -> str:
    """What the dashboard's search matches a command against: its words as one line, in any
    case (str.casefold, so the same on SQLite and PostgreSQL)."""
    return " ".join(map(str, command)).casefold()


class RunQuerySet(models.QuerySet):
    def named(self, name: str) -> RunQuerySet:
        """run-7 or 7; any other text names no run."""
        number = run_number(name)
        return self.none() if number is None else self.filter(pk=number)

    def visible_to(self, user) -> RunQuerySet:
        """The runs of the user's orgs: every page, API call and websocket asks this."""
        if not user or not user.is_authenticated:
            return self.none()
        return self.filter(**{VIEWER: user})

    def viewers(self, run_ids: set[int], user_ids: set[int]) -> set[tuple[int, int]]:
        """visible_to for many at once: the (run, user) pairs among these where the user sees
        the run, in one query."""
        pairs = self.filter(pk__in=run_ids, **{f"{VIEWER}__in": user_ids})
        return set(pairs.values_list("pk", VIEWER))


class Run(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        # Its supervisor went without recording how the command ended (killed, or its
        # machine restarted); it goes on running if that supervisor is heard from again.
        LOST = "lost"

    org = models.ForeignKey(Org, models.CASCADE, related_name="runs")
    status = models.CharField(max_length=20, choices=Status, default=Status.RUNNING)
    command = models.JSONField(default=list)
    exit_code = models.IntegerField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)
    started = models.DateTimeField(null=True, blank=True)
    ended = models.DateTimeField(null=True, blank=True)
    # The ingester's bookmark: bytes of telemetry.jsonl stored, and points so far (the last seq).
    offset = models.BigIntegerField(default=0)
    points = models.IntegerField(default=0)
    # Points up to this seq are stored by key (Chunk); the later ones whole (Point).
    sealed = models.IntegerField(default=0)
    telemetry_closed = models.BooleanField(default=False)
    # The offset is inside a line already dropped as too long: skip to its newline.
    in_long_line = models.BooleanField(default=False)
    # The supervisor's heartbeat: who runs the command (host and pid), and when it last said so.
    heartbeat = models.DateTimeField(null=True, blank=True)
    supervisor_host = models.CharField(max_length=255, blank=True)
    supervisor_pid = models.IntegerField(null=True, blank=True)
    # When the supervisor's process started (clock ticks since its machine booted): a live
    # process with its pid that started at another time is another, the pid given again.
    supervisor_started = models.BigIntegerField(null=True, blank=True)
    # The command's process, which leads a process group of its own (its id is the pid), and
    # when it started: what is stopped when the run is lost (supervision.stop_command).
    command_pid = models.IntegerField(null=True, blank=True)
    command_started = models.BigIntegerField(null=True, blank=True)
    # Which file the offset counts bytes of, stored with it: "device:inode", and a fingerprint
    # of its first bytes read. Another file there (rotated, truncated) is then read from its start.
    telemetry_inode = models.CharField(max_length=64, blank=True)
    telemetry_head = models.CharField(max_length=64, blank=True)
    # Why the telemetry path cannot be read now ("is a directory"); empty when it can.
    telemetry_problem = models.CharField(max_length=200, blank=True)
    # When the rotated file read before the current one was last written (ns since the epoch):
    # rotated files beside the path written after it are yet to be read (tailing.Mark.after).
    telemetry_after = models.BigIntegerField(default=0)
    # Which ingester holds the run, and until when: one process at a time per run.
    lease_owner = models.CharField(max_length=100, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    # Which DIVERGENT_HOME holds the run's files (homes.home_id()): only an ingester of that
    # home takes its lease. Empty for a run made before homes were recorded: the first
    # ingester that finds its folder records its own.
    home = models.CharField(max_length=64, blank=True)
    # Who made the run: only they (by any of their tokens) upload to it and end it.
    creator = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # Its supervisor is a `div` on another machine that speaks over the API: it is judged by
    # its silence alone (supervision.gone), never by a pid of this machine.
    remote = models.BooleanField(default=False)
    # The masked command as one line, case-folded: what the dashboard's search reads, the same
    # on every database (save() keeps it).
    search_text = models.TextField(blank=True, default="")

    objects = RunQuerySet.as_manager()

    class Meta:
        indexes = [
            # The ingester's scan: runs whose telemetry is still open.
            models.Index(
                fields=["telemetry_closed"],
                name="open_runs",
                condition=models.Q(telemetry_closed=False),
            ),
            # The dashboard's page of one org, newest first (?org=lab, or a user of one org):
            # WHERE org_id = ? ORDER BY created DESC, id DESC LIMIT 50, read in order, no sort.
            # For a user of several orgs it finds each org's runs (and counts them) in place of
            # the table's rows. bench/dashboard.py --without-indexes measures them all.
            models.Index(fields=["org", "-created", "-id"], name="runs_by_created"),
            # The dashboard filtered by status: COUNT(*) WHERE org_id IN (...) AND status = ?,
            # and that page newest first.
            models.Index(fields=["org", "status", "-created", "-id"], name="runs_by_status"),
            # The dashboard sorted by points: WHERE org_id = ? ORDER BY points, id.
            models.Index(fields=["org", "points", "id"], name="runs_by_points"),
        ]

    def save(self, *args, **kwargs):
        self.search_text = search_text(self.command)
        super().save(*args, **kwargs)

    def __str__(self) -> str:
        return self.name

    @property
    def duration(self):
        """How long it ran, or has run so far; None before it starts."""
        if self.started is None:
            return None
        return (self.ended or timezone.now()) - self.started

    @property
    def name(self) -> str:
        return f"run-{self.pk}"

    @property
    def is_live(self) -> bool:
        return self.status == self.Status.RUNNING

    @property
    def telemetry_unread(self) -> bool:
        """Ended, but its telemetry is not all read yet: no ingester was there when it ended
        (`div serve` or `div ingest` reads it), or one is reading it now."""
        return not self.is_live and not self.telemetry_closed

    @property
    def folder(self) -> Path:
        return settings.RUNS_DIR / self.name

    @property
    def telemetry_path(self) -> Path:
        return self.folder / "telemetry.jsonl"

    @property
    def log_path(self) -> Path:
        return self.folder / "log"

    @property
    def files_path(self) -> Path:
        return self.folder / "files"


class Layout(models.Model):
    """The run's telemetry.toml as it was when the run was created."""

    run = models.OneToOneField(Run, models.CASCADE, related_name="layout")
    source = models.TextField(blank=True)  # empty for the default layout
    origin = models.CharField(max_length=500, blank=True)  # the file it was read from
    parsed = models.JSONField()

    def __str__(self) -> str:
        return f"layout of {self.run}"


class Point(models.Model):
    """A point stored whole, until its window of chunks.WINDOW points is sealed into chunks: the
    newest points of a live run, fewer than a window of them. A row a point is the cheapest
    write there is, and a live run writes a few points at a time."""

    # No index of its own: the unique (run, seq) index below leads with the run.
    run = models.ForeignKey(Run, models.CASCADE, related_name="point_set", db_index=False)
    seq = models.IntegerField()  # the point's place in the run: 1-based, gap-free
    # Its numbers as JSON text, as the ingester wrote it: read back as written on every database.
    data = models.TextField()

    class Meta:
        constraints = [
            # Also the index behind every read: a run's points in order, or after a seq.
            models.UniqueConstraint(fields=["run", "seq"], name="one_point_per_seq"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq}"


class Chunk(models.Model):
    """One key's values in one window of chunks.WINDOW points, sealed: written once, never
    changed. chunks.py packs and unpacks them."""

    # No index of its own: both indexes below lead with the run.
    run = models.ForeignKey(Run, models.CASCADE, related_name="chunks", db_index=False)
    key_no = models.SmallIntegerField()  # the key's Key.order
    window_no = models.IntegerField()  # (seq - 1) // WINDOW
    count = models.IntegerField()
    first_seq = models.IntegerField()
    stride = models.IntegerField()  # between seqs when evenly spaced; 0 when seqs lists them
    seqs = models.BinaryField(null=True)
    kind = models.SmallIntegerField()  # chunks.FLOATS, INTS or MIXED
    vals = models.BinaryField()
    low = models.FloatField()  # the lowest and highest value: an x range finds its windows
    high = models.FloatField()

    class Meta:
        constraints = [
            # A key's values by seq range: a panel's series, div telemetry RUN KEY.
            models.UniqueConstraint(
                fields=["run", "key_no", "window_no"], name="one_chunk_per_key_and_window"
            ),
        ]
        indexes = [
            # Every key's values by seq range: whole points for --json, the websocket's
            # backlog, the points API and the admin.
            models.Index(fields=["run", "window_no"], name="chunks_by_window"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id} key {self.key_no} window {self.window_no}"


class Overview(models.Model):
    """Min/max buckets of a y key against an x key that a panel draws (overview.py), as of
    `upto`: a panel's first view and a sparkline read these, not the points."""

    run = models.ForeignKey(Run, models.CASCADE, related_name="overviews", db_index=False)
    y_no = models.SmallIntegerField()  # Key.order
    x_no = models.SmallIntegerField()  # Key.order, or 0: the point's seq
    upto = models.IntegerField()  # the last seq taken in: the run's sealed seq when written
    head = models.BinaryField()  # size, counts, first and last point, spacing
    coarse = models.BinaryField()  # the coarse level's buckets, whole

    class Meta:
        constraints = [
            # A panel's pair, and every pair of a run when the ingester takes it up.
            models.UniqueConstraint(fields=["run", "y_no", "x_no"], name="one_overview_per_pair"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id} key {self.y_no} against {self.x_no}"


class OverviewPart(models.Model):
    """overview.PART fine buckets of an overview: a new window rewrites only its last part."""

    overview = models.ForeignKey(Overview, models.CASCADE, related_name="parts", db_index=False)
    part = models.SmallIntegerField()
    buckets = models.BinaryField()

    class Meta:
        constraints = [
            # An overview's parts in order.
            models.UniqueConstraint(fields=["overview", "part"], name="one_overview_part"),
        ]

    def __str__(self) -> str:
        return f"{self.overview} part {self.part}"


class NumberField(models.TextField):
    """A number as written: its repr, read back as the same int or float on every database.
    PostgreSQL's jsonb would read 1e20 back as its 21 digits, an integer, and -0.0 as 0.0."""

    def from_db_value(self, value, expression, connection):
        return None if value is None else number_from_text(value)

    def to_python(self, value):
        return number_from_text(value) if isinstance(value, str) else value

    def get_prep_value(self, value):
        return None if value is None else repr(value)


def number_from_text(text: str) -> int | float:
    """An int's repr is its digits (and a sign); a float's never is: it has a point, or an e."""
    return int(text) if text.lstrip("-").isdigit() else float(text)


class Key(models.Model):
    """One key a run has written, with its stats: the key table is read from here alone."""

    run = models.ForeignKey(Run, models.CASCADE, related_name="keys")
    name = models.CharField(max_length=4096)
    order = models.IntegerField()  # 1 for the first key the run wrote
    count = models.IntegerField(default=0)
    last = NumberField(null=True)
    min = NumberField(null=True)
    max = NumberField(null=True)
    passed_over = models.IntegerField(default=0)  # values that were NaN or Infinity
    first_passed_seq = models.IntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            # Also serves the key table: a run's keys in order of first arrival.
            models.UniqueConstraint(fields=["run", "order"], name="one_key_per_order"),
            models.UniqueConstraint(fields=["run", "name"], name="one_key_per_name"),
        ]

    def __str__(self) -> str:
        return self.name


class Drop(models.Model):
    run = models.ForeignKey(Run, models.CASCADE, related_name="drops")
    reason = models.CharField(max_length=40)
    count = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "reason"], name="one_drop_count_per_reason")
        ]

    def __str__(self) -> str:
        return f"{self.reason}: {self.count}"


class Token(models.Model):
    """An API token of a user's: `Authorization: Bearer <token>` does what the user can.

    Only a SHA-256 digest of the token is kept: tokens are long random strings, so the digest
    alone finds one, and a copy of the database gives none away."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="tokens")
    name = models.CharField(max_length=100)
    # Unique: also the index behind every request's lookup by digest.
    digest = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(default=timezone.now)
    last_used = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # Also serves the account page and `div token list`: a user's tokens by name.
            models.UniqueConstraint(fields=["user", "name"], name="one_token_per_name_and_user")
        ]

    def __str__(self) -> str:
        # Never the digest: this is what the admin and the logs show.
        return f"{self.user}/{self.name}"


# ---- the dashboard ---------------------------------------------------------------------------


class StatValue(models.Model):
    """A run's stat card's value, where SQL can sort by it: the dashboard sorts runs by a card,
    known across layouts by its title (telemetry/listing.py). Kept by the ingester in the same
    transaction as the key stats it is reduced from (services.ingest_batch); a run has a row
    for a card once the card's key has a value."""

    run = models.ForeignKey(Run, models.CASCADE, related_name="stat_values", db_index=False)
    title = models.CharField(max_length=200)
    value = models.FloatField()

    class Meta:
        constraints = [
            # The page sorted by a card: LEFT JOIN ON run_id = ? AND title = ?, one row a run;
            # the titles a dashboard offers to sort by (SELECT DISTINCT title WHERE run_id IN
            # the user's runs, read from the index alone); the ingester's upsert.
            models.UniqueConstraint(fields=["run", "title"], name="one_stat_value_per_title"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id} {self.title}: {self.value}"


class Sparkline(models.Model):
    """What a run's dashboard row draws: its first panel's first key against its x, at about
    64 min/max buckets (telemetry/sparkline.py), as JSON [xs, ys]. The ingester rewrites it
    with each batch that brings that key, so a page reads one small row a run, never points."""

    run = models.OneToOneField(Run, models.CASCADE, primary_key=True, related_name="sparkline")
    y = models.TextField()
    x = models.TextField(null=True)  # None: the point's place in the run
    upto = models.IntegerField()  # the last seq it has taken in
    line = models.TextField()

    def __str__(self) -> str:
        return f"{self.run_id} {self.y} against {self.x or 'seq'} up to {self.upto}"
