"""The pages: the runs, a run with its Telemetry, Log and Layout tabs, and a comparison of runs."""

from __future__ import annotations

from django.contrib.auth import get_user_model, login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.tokens import default_token_generator
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.http import urlsafe_base64_decode
from django.views.decorators.cache import never_cache

from telemetry import address, comparison, queries, services
from telemetry.api import comparison_of, detail_of
from telemetry.errors import Refused, RunNotFound
from telemetry.layout import KEY_PATTERN


@login_required
def dashboard(request):
    return render(request, "telemetry/dashboard.html")


@login_required
def run_page(request, name: str):
    try:
        run = queries.run_named(name, user=request.user)
    except RunNotFound:
        raise Http404("no such run") from None
    detail = detail_of(run)
    drops = [drop["notice"] for drop in detail["drops"]]
    return render(request, "telemetry/run.html", {"run": run, "drops": drops, "detail": detail})


@login_required
def compare_page(request):
    """/compare/?runs=run-3,run-7[&layout=run-7][&x=epoch]: the runs drawn on one layout's
    panels. A list naming a run the user may not see (or none, or a name that is not a run's)
    is the 404 page, never a comparison of the others; so is a bad layout or x."""
    params = request.GET
    x = params.get("x") or None
    try:
        runs, shown = queries.runs_compared(
            comparison.listed(params.getlist("runs")),
            user=request.user,
            layout=params.get("layout") or None,
        )
    except Refused:
        raise Http404("no such comparison") from None
    if x is not None and not KEY_PATTERN.fullmatch(x):
        raise Http404("no such key")
    detail = comparison_of(runs, shown, x)
    return render(request, "telemetry/compare.html", {"runs": runs, "detail": detail})


def login_link(request, uidb64: str, token: str):
    """A one-time link from `div user add` or a first `div serve`: it works once."""
    try:
        user = get_user_model().objects.get(pk=int(urlsafe_base64_decode(uidb64)))
    except (ValueError, TypeError, OverflowError, get_user_model().DoesNotExist):
        user = None
    # The token is tied to the user's last login, so logging in uses it up.
    if user is None or not default_token_generator.check_token(user, token):
        return render(request, "registration/link_used.html", status=404)
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    return redirect("dashboard")


@never_cache
@login_required
def account(request):
    """The user's API tokens: made here (the text shown on this one page, never again),
    listed with when each was last used, and revoked. CSRF-protected, as every form is."""
    context = {"server": address.public_url(), "made": None, "text": "", "error": ""}
    if request.method == "POST":
        try:
            if "revoke" in request.POST:
                services.token_revoke(user=request.user, name=request.POST["revoke"])
            else:
                name = request.POST.get("name", "").strip() or None
                context["made"], context["text"] = services.token_create(
                    user=request.user, name=name
                )
        except Refused as e:
            context["error"] = str(e)
    context["tokens"] = queries.tokens_of(request.user)
    return render(request, "telemetry/account.html", context)
