"""The dashboard's rules: which runs a query string asks for, in what order, and what each row
draws. Pure: no Django, no I/O; queries.run_page runs what it decides.

- A page is PER_PAGE runs. A query string names at most one page, filters (status, org, a
  search over name and command) and one sort; anything it cannot read is a ListingError, one
  line that says what to change.
- A stat card is known across runs by its title: runs launched with different layouts share a
  column when their cards have the same title. When a layout has two cards of one title, the
  first is the one sorted by. A run without that card, or whose card has no value yet, comes
  after every run that has one, whichever way the sort goes.
- Every sort ends on the run's number, newest first, so that a page is the same each time it
  is asked for and no run is on two pages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from telemetry.layout import MAX_TITLE, panels_for, stats_for
from telemetry.lines import Number

PER_PAGE = 50
MAX_PAGE = 10**9  # far past any page there is, and within what a database can offset by
STATUSES = ("running", "succeeded", "failed", "lost")
COLUMNS = ("created", "duration", "points")  # the sorts every run has
CARD = "stat:"  # a sort by a stat card: stat:<its title>
MAX_SEARCH = 200  # characters
MAX_FILTERS = 20  # values of one filter
DEFAULT_SORT = "-created"

# What a bad query string says, in one place: the text of each 400.
BAD = {
    "page": '"page" is "{value}", which is not a page number from 1 to {most:,}',
    "status": '"status" is "{value}", which is not one of ' + ", ".join(STATUSES),
    "org": '"org" is "{value}", which is not one of your orgs: {orgs}',
    "search": '"q" has {length:,} characters; search with up to {most}',
    "nul": '"{name}" has a NUL character, which no {holder} holds',
    "sort": (
        '"sort" is "{value}", which is not one of created, duration, points or stat:<a card\'s '
        "title>, with - before it for the highest first"
    ),
    "card": '"sort" names a card title of {length:,} characters; a title has up to {most}',
    "too_many": '"{name}" is given {count} times; filter by up to {most}',
}


class ListingError(ValueError):
    """A query string the dashboard cannot read; str() is the one line to show."""


@dataclass(frozen=True)
class Listing:
    page: int = 1
    statuses: tuple[str, ...] = ()  # any of these; none: every status
    orgs: tuple[str, ...] = ()  # any of these (by name); none: every org of the user's
    search: str = ""  # a part of the run's name or command, any case
    column: str = "created"  # created, duration, points; or "stat" with card set
    card: str | None = None  # the title of the stat card sorted by
    descending: bool = True

    @property
    def sort(self) -> str:
        """The sort as the query string says it: -created, points, -stat:Samples/s."""
        name = CARD + self.card if self.card is not None else self.column
        return ("-" if self.descending else "") + name

    @property
    def offset(self) -> int:
        return (self.page - 1) * PER_PAGE


def parse(params: Mapping[str, Sequence[str]], orgs: Sequence[str]) -> Listing:
    """A query string's values (each name's list, as Django's QueryDict.lists() gives them)
    -> the Listing it asks for; `orgs` are the names of the user's orgs, the only ones it may
    filter by. ListingError says what to change."""
    page = _last(params, "page") or "1"
    if not (page.isascii() and page.isdigit() and len(page) <= 10 and 1 <= int(page) <= MAX_PAGE):
        raise ListingError(BAD["page"].format(value=_shown(page), most=MAX_PAGE))
    statuses = _many(params, "status")
    for status in statuses:
        if status not in STATUSES:
            raise ListingError(BAD["status"].format(value=_shown(status)))
    chosen = _many(params, "org")
    for org in chosen:
        if org not in orgs:
            mine = ", ".join(orgs) or "you are in none"
            raise ListingError(BAD["org"].format(value=_shown(org), orgs=mine))
    search = (_last(params, "q") or "").strip()
    if len(search) > MAX_SEARCH:
        raise ListingError(BAD["search"].format(length=len(search), most=MAX_SEARCH))
    _text("q", search, "name or command")
    sort = _last(params, "sort") or DEFAULT_SORT
    descending = sort.startswith("-")
    name = sort[1:] if descending else sort
    column, card = name, None
    if name.startswith(CARD) and len(name) > len(CARD):
        column, card = "stat", name[len(CARD) :]
        if len(card) > MAX_TITLE:
            raise ListingError(BAD["card"].format(length=len(card), most=MAX_TITLE))
        _text("sort", card, "card title")
    elif name not in COLUMNS:
        raise ListingError(BAD["sort"].format(value=_shown(sort)))
    return Listing(
        page=int(page),
        statuses=tuple(dict.fromkeys(statuses)),
        orgs=tuple(dict.fromkeys(chosen)),
        search=search,
        column=column,
        card=card,
        descending=descending,
    )


def _last(params: Mapping[str, Sequence[str]], name: str) -> str | None:
    values = params.get(name) or []
    return values[-1] if values else None


def _many(params: Mapping[str, Sequence[str]], name: str) -> list[str]:
    """A filter's values: repeated (?status=failed&status=lost) or joined by commas."""
    values = [part for value in params.get(name) or [] for part in value.split(",") if part]
    if len(values) > MAX_FILTERS:
        raise ListingError(BAD["too_many"].format(name=name, count=len(values), most=MAX_FILTERS))
    return values


def _text(name: str, value: str, holder: str) -> None:
    """The rule for every text the listing matches in the database (the search, a card's
    title): PostgreSQL's text holds no NUL, so one is refused here, the same on SQLite."""
    if "\x00" in value:
        raise ListingError(BAD["nul"].format(name=name, holder=holder))


def _shown(value: str, most: int = 60) -> str:
    """A value quoted back in an error: on one line, and cut short."""
    value = value.encode("unicode_escape").decode("ascii")
    return value if len(value) <= most else value[: most - 1] + "…"


def pages(total: int) -> int:
    """How many pages the runs fill: one at least, empty when there are none."""
    return max(1, -(-total // PER_PAGE))


# ---- what a row shows ------------------------------------------------------------------------


def card_values(
    layout: dict, value_of: Callable[[str, str], Number | None]
) -> dict[str, Number | None]:
    """Title -> the value a run's cards sort by: the first card of each title, reduced as it
    says (value_of(key, reduce), None for a key not written yet)."""
    values: dict[str, Number | None] = {}
    for stat in stats_for(layout):
        if stat["title"] not in values:
            values[stat["title"]] = value_of(stat["y"], stat["reduce"])
    return values


def sparkline_pair(layout: dict, keys: Sequence[str]) -> tuple[str, str | None] | None:
    """What a row's sparkline draws: the first panel's first key against its x (None: the
    point's place in the run); None for a run with no panel yet.

    `keys` need not be every key the run has written: its first two (in order of first
    arrival) and step, when written, decide the first panel of any layout."""
    panels = panels_for(layout, list(keys))
    if not panels:
        return None
    return panels[0]["y"][0], panels[0]["x"]
