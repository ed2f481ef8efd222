"""The API a `div` on another machine speaks (docs/api.md, "The remote div"): runs made,
their files uploaded and their end reported, the runs listed and the log read as bytes,
an org's secrets, a user's tokens.

A token does what its user can: every run is read through api.visible_run (another org's is
a 404, as for a session), and only the user who made a run uploads to it or ends it; a
teammate reads it. Refusals are `{"error": "<one line>"}`, which the remote `div` prints.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from functools import wraps

from django.http import HttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from rest_framework import status
from rest_framework.decorators import api_view
from rest_framework.response import Response

from telemetry import api, homes, queries, receiving, services
from telemetry.encryption import SecretsKeyError
from telemetry.errors import Refused, RunNotFound
from telemetry.ingest import SECRETS_TTL
from telemetry.masking import Masker
from telemetry.models import Run

LOG_BYTES = 1024 * 1024  # the most of a log one GET /log/bytes/ sends
WHOLE = re.compile(r"[0-9]{1,18}")
HEARD_EVERY = 1.0  # seconds: an upload counts as a heartbeat at most this often
SUPERVISOR = re.compile(r"([0-9]{1,9})@(.{1,255})")

NOT_REMOTE = "{run} runs on the server's own machine: nothing is uploaded to it"
NOT_HELD = (
    "{run}'s files are kept in another DIVERGENT_HOME than this server's: its uploads go to the "
    "div serve whose home holds them (every server that takes uploads shares one home)"
)
NOT_YOURS = "{run} was started by {creator}: only their tokens upload to it or end it"
NO_OFFSET = '"offset" is "{value}", which is not a whole number of bytes'
BAD_BODY = "send a JSON object with {fields}"
# PostgreSQL's text holds no NUL; no argv, host name or file name has one either.
HAS_NUL = '"{field}" holds a NUL character, which no host name, argument or path has'
SECRETS_UNREADABLE = "the server cannot read the org's secrets ({why}); its admin must fix that"
ENDED_OTHERWISE = "{run} has already ended with exit code {code}"


class Forbidden(Refused):
    """Refused for who asks, not for what: a 403."""


class Misdirected(Refused):
    """Asked of the wrong server: one of another home on the same database. A 421."""


def refusals(view: Callable) -> Callable:
    """A Refused becomes `{"error": ...}`: 404 for a run not found, 409 (with the server's
    offset) for a chunk past it, 403 for who asks, 421 for a server of another home, 400 for
    anything else asked wrong."""

    @wraps(view)
    def answer(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except RunNotFound as e:
            return Response({"error": str(e)}, status=status.HTTP_404_NOT_FOUND)
        except receiving.Behind as e:
            answer = {"error": str(e), "kind": e.kind, "offset": e.offset}
            return Response(answer, status=status.HTTP_409_CONFLICT)
        except Forbidden as e:
            return Response({"error": str(e)}, status=status.HTTP_403_FORBIDDEN)
        except Misdirected as e:
            return Response({"error": str(e)}, status=status.HTTP_421_MISDIRECTED_REQUEST)
        except Refused as e:
            return Response({"error": str(e)}, status=status.HTTP_400_BAD_REQUEST)
        except SecretsKeyError as e:
            # The server's key, not the request: the client retries; nothing goes unmasked.
            message = SECRETS_UNREADABLE.format(why=e)
            return Response({"error": message}, status=status.HTTP_503_SERVICE_UNAVAILABLE)

    return answer


INT32 = 2**31
SIZE = 2**63  # a file's bytes: as many as an upload's 18-digit offset can name


class Size:
    """A field that counts a file's bytes: 0 up to 63 bits, where other whole numbers (an exit
    code, a pid) are held to the 32 bits of their database column."""


def _body(request, **fields: type | tuple) -> dict:
    """The JSON object of a request, each field of its type (a type tuple may hold None)."""
    data = request.data
    wanted = ", ".join(f'"{name}"' for name in fields)
    if not isinstance(data, dict):
        raise Refused(BAD_BODY.format(fields=wanted))
    for name, kind in fields.items():
        value = data.get(name)
        low, high = (0, SIZE) if kind is Size else (-INT32 + 1, INT32)
        kind = int if kind is Size else kind
        if not isinstance(value, kind) or isinstance(value, bool):
            raise Refused(BAD_BODY.format(fields=wanted))
        if isinstance(value, int) and not low <= value < high:
            raise Refused(BAD_BODY.format(fields=wanted))
    return data


def _no_nul(**texts: str) -> None:
    for field, text in texts.items():
        if "\x00" in text:
            raise Refused(HAS_NUL.format(field=field))


# ---- making a run -----------------------------------------------------------------------


@api_view(["POST"])
@refusals
def open_run(request):
    """A run for a `div run` on another machine: the layout parsed here, the answer with what
    its process needs (its name, and its org's secrets for its environment)."""
    data = _body(request, org=(str, type(None)), command=list, layout=dict, host=str, pid=int)
    layout = data["layout"]
    command = data["command"]
    source, origin = layout.get("source", ""), layout.get("origin", "")
    if not all(isinstance(x, str) for x in (*command, source, origin)):
        raise Refused(BAD_BODY.format(fields='"command" (strings) and "layout"'))
    _no_nul(host=data["host"], command="".join(command), origin=origin)
    run = services.run_open(
        user=request.user,
        org=data["org"],
        command=command,
        layout_source=source,
        layout_origin=origin,
        host=data["host"][:255],
        pid=data["pid"],
    )
    secrets = services.secrets_of(run.org_id)
    return Response(
        {"name": run.name, "org": run.org.name, "secrets": secrets},
        status=status.HTTP_201_CREATED,
    )


@csrf_exempt  # each method's own view checks CSRF for a session, as DRF does
def runs(request):
    """/api/runs/: GET lists the runs (api.runs), POST makes one (open_run)."""
    return (open_run if request.method == "POST" else api.runs)(request)


# ---- a run's files arriving -------------------------------------------------------------


def own_run(request, name: str) -> Run:
    """A run the user sees (else a 404) and made (else a 403), that reports over the API, to
    the home that holds its files (else a 421: two homes on one database)."""
    try:
        run = queries.run_named(name, user=request.user)
    except RunNotFound:
        raise RunNotFound(queries.UNKNOWN_RUN.format(name=name)) from None
    if not run.remote:
        raise Forbidden(NOT_REMOTE.format(run=run.name))
    if run.creator_id != request.user.pk:
        creator = run.creator.username if run.creator else "a user since deleted"
        raise Forbidden(NOT_YOURS.format(run=run.name, creator=creator))
    if not homes.holds(run):
        raise Misdirected(NOT_HELD.format(run=run.name))
    return run


_maskers: dict[int, tuple[float, Masker]] = {}


def masker_for(run: Run) -> Masker:
    """The org's masker, read again every SECRETS_TTL seconds as the ingester's is; a key that
    cannot read the secrets is a 503 the client retries, never a log left unmasked."""
    read_at, masker = _maskers.get(run.org_id, (0.0, None))
    if masker is None or time.monotonic() - read_at > SECRETS_TTL:
        masker = services.masker_for(run.org_id)
        _maskers[run.org_id] = (time.monotonic(), masker)
    return masker


def heard(request, run: Run) -> None:
    """An upload from the run's supervisor (it says so in Divergent-Supervisor: pid@host) is a
    heartbeat, noted at most every HEARD_EVERY seconds; a lost run is back to running."""
    said = SUPERVISOR.fullmatch(request.headers.get("Divergent-Supervisor", ""))
    if said is None:
        return
    pid, host = int(said[1]), said[2]
    beat = run.heartbeat
    late = beat is None or (timezone.now() - beat).total_seconds() > HEARD_EVERY
    other = (host, pid) != (run.supervisor_host, run.supervisor_pid)
    if late or other or run.status == Run.Status.LOST:
        services.run_heartbeat(run_id=run.pk, host=host, pid=pid)


@api_view(["GET"])
@refusals
def files(request, name: str):
    """How many bytes of each of the client's files the server has."""
    return Response(receiving.offsets(own_run(request, name)))


@api_view(["POST"])
@refusals
def upload(request, name: str, kind: str):
    """A chunk of the client's telemetry file or log, from the offset it names."""
    run = own_run(request, name)
    value = request.query_params.get("offset", "")
    if not WHOLE.fullmatch(value):
        raise Refused(NO_OFFSET.format(value=value))
    size = request.META.get("CONTENT_LENGTH") or ""
    if size.isdigit() and int(size) > receiving.MAX_CHUNK:
        return too_large(int(size))
    data = request.body
    if len(data) > receiving.MAX_CHUNK:
        return too_large(len(data))
    masker = masker_for(run) if kind == "log" else Masker(())
    offset, took = receiving.receive(run, kind, int(value), data, masker)
    if took and kind == "telemetry":
        services.run_reopen(run=run)
    heard(request, run)
    return Response({"offset": offset})


def too_large(size: int) -> Response:
    message = receiving.TOO_LARGE.format(limit=receiving.MAX_CHUNK, size=size)
    return Response(
        {"error": message, "limit": receiving.MAX_CHUNK},
        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
    )


@api_view(["POST"])
@refusals
def heartbeat(request, name: str):
    """The supervisor is there: {"host", "pid"}. The answer has the org's secrets as they are
    now, so the client masks a secret set while its run goes on."""
    run = own_run(request, name)
    data = _body(request, host=str, pid=int)
    _no_nul(host=data["host"])
    services.run_heartbeat(run_id=run.pk, host=data["host"][:255], pid=data["pid"])
    run.refresh_from_db(fields=["status"])
    return Response({"status": run.status, "secrets": services.secrets_of(run.org_id)})


@api_view(["POST"])
@refusals
def end(request, name: str):
    """How the command ended, {"exit_code", "telemetry", "log"} (the sizes of the client's
    files): taken only once the server has every byte of both. Saying it again is fine."""
    run = own_run(request, name)
    data = _body(request, exit_code=int, telemetry=Size, log=Size)
    code = data["exit_code"]
    if run.exit_code is not None:
        if run.exit_code != code:
            raise Refused(ENDED_OTHERWISE.format(run=run.name, code=run.exit_code))
        return Response({"status": run.status})
    receiving.complete(run, telemetry=data["telemetry"], log=data["log"], masker=masker_for(run))
    services.run_finish(run=run, exit_code=code)
    return Response({"status": run.status})


# ---- reading, as the local commands do ----------------------------------------------------


@api_view(["GET"])
def listing(request):
    """The runs the user sees, oldest first, as `div telemetry` lists them."""
    return Response(
        {
            "runs": [
                {"name": n, "status": s, "points": p, "keys": k, "created": c}
                for n, s, p, k, c in queries.runs_listing(user=request.user)
            ]
        }
    )


@api_view(["GET"])
def log_bytes(request, name: str):
    """The masked log from a byte offset, as written (bytes and all), for a remote `div log`:
    Divergent-Live says whether the run was still going before these bytes were read."""
    run = api.visible_run(request, name)
    value = request.query_params.get("offset") or "0"
    if not WHOLE.fullmatch(value):
        return Response({"error": NO_OFFSET.format(value=value)}, status=400)
    live = run.is_live
    try:
        with open(run.log_path, "rb") as log:
            log.seek(int(value))
            data = log.read(LOG_BYTES)
    except FileNotFoundError:  # a run of another home: its log is not on this machine
        data = b""
    response = HttpResponse(data, content_type="application/octet-stream")
    response["Divergent-Live"] = "1" if live else "0"
    return response


# ---- who asks: their orgs, secrets and tokens -----------------------------------------------


@api_view(["GET"])
def me(request):
    return Response({"username": request.user.username, "orgs": queries.orgs_of(request.user)})


@api_view(["GET"])
@refusals
def secret_names(request, org: str):
    """The names of an org's secrets, never their values: to its members."""
    found = services.secrets_org(name=org, user=request.user)
    return Response({"names": queries.secret_names(found.name)})


@api_view(["PUT", "DELETE"])
@refusals
def secret(request, org: str, name: str):
    """PUT {"value"} sets a secret of one of the user's orgs; DELETE deletes it."""
    if request.method == "DELETE":
        services.secret_delete(org=org, name=name, user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
    value = _body(request, value=str)["value"]
    try:
        services.secret_put(org=org, name=name, value=value, user=request.user)
    except SecretsKeyError as e:
        raise Refused(str(e)) from None
    return Response(status=status.HTTP_204_NO_CONTENT)


def token_row(token) -> dict:
    return {"name": token.name, "created": token.created, "last_used": token.last_used}


@api_view(["GET", "POST"])
@refusals
def tokens(request):
    """GET: the user's tokens (never their text); POST {"name"}: a new one, its text this once."""
    if request.method == "GET":
        return Response({"tokens": [token_row(t) for t in queries.tokens_of(request.user)]})
    name = _body(request, name=(str, type(None))).get("name")
    token, text = services.token_create(user=request.user, name=name)
    return Response({**token_row(token), "token": text}, status=status.HTTP_201_CREATED)


@api_view(["DELETE"])
@refusals
def token(request, name: str):
    services.token_revoke(user=request.user, name=name)
    return Response(status=status.HTTP_204_NO_CONTENT)
