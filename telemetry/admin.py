from __future__ import annotations

import json

from django import forms
from django.contrib import admin
from django.contrib.admin.views.main import ERROR_FLAG
from django.contrib.auth import admin as auth_admin
from django.contrib.auth.models import Group, User
from django.core.exceptions import PermissionDenied
from django.db import DatabaseError, transaction
from django.http import Http404, HttpResponseRedirect
from django.template.response import SimpleTemplateResponse, TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.views.decorators.http import require_GET

from telemetry import queries, services
from telemetry.encryption import SecretsKeyError
from telemetry.errors import Refused
from telemetry.models import Drop, Key, Layout, Membership, Org, Run, Secret, Token

POINTS_A_PAGE = 100


class ListsThatMayFail(admin.ModelAdmin):
    """The admin takes any lookup on a model's own fields from the query string, and some only
    fail once the list is read: ?status__regex=( (a pattern the database cannot read), a JSON
    lookup SQLite lacks. Those get the page Django's admin gives a lookup it cannot make (the
    list again, flagged ?e=1), never a 500."""

    def changelist_view(self, request, extra_context=None):
        try:
            with transaction.atomic():  # a failed query leaves PostgreSQL's transaction usable
                response = super().changelist_view(request, extra_context)
                if hasattr(response, "render"):
                    response.render()  # the rows are read as the page is drawn
        except DatabaseError:
            if ERROR_FLAG in request.GET:  # the lookup came back with the flag: the admin's page
                return SimpleTemplateResponse(
                    "admin/invalid_setup.html", {"title": "Database error"}, status=400
                )
            return HttpResponseRedirect(f"{request.path}?{ERROR_FLAG}=1")
        return response


admin.site.unregister(User)
admin.site.unregister(Group)


@admin.register(User)
class UserAdmin(ListsThatMayFail, auth_admin.UserAdmin):
    pass


@admin.register(Group)
class GroupAdmin(ListsThatMayFail, auth_admin.GroupAdmin):
    pass


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class KeyInline(ReadOnlyInline):
    model = Key
    fields = ["order", "name", "count", "last", "min", "max", "passed_over", "first_passed_seq"]
    ordering = ["order"]


class DropInline(ReadOnlyInline):
    model = Drop
    fields = ["reason", "count"]


class LayoutInline(admin.StackedInline):
    model = Layout
    can_delete = False
    fields = ["origin", "source", "parsed"]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    raw_id_fields = ["user"]


@admin.register(Org)
class OrgAdmin(ListsThatMayFail):
    list_display = ["name"]
    inlines = [MembershipInline]


class SecretForm(forms.ModelForm):
    # The value can be replaced, never read back: the field starts empty on every page.
    value = forms.CharField(
        widget=forms.PasswordInput(render_value=False), required=True, strip=False
    )

    class Meta:
        model = Secret
        fields = ["org", "name"]

    def clean_name(self) -> str:
        try:
            return services.secret_name_check(name=self.cleaned_data["name"])
        except Refused as e:
            raise forms.ValidationError(str(e)) from None

    def clean_value(self) -> str:
        try:
            self.instance.sealed = services.secret_seal(value=self.cleaned_data["value"])
        except (services.SecretRefused, SecretsKeyError) as e:
            raise forms.ValidationError(str(e)) from None
        return ""  # the value itself goes no further than its encryption


@admin.register(Secret)
class SecretAdmin(ListsThatMayFail):
    form = SecretForm
    list_display = ["name", "org"]
    list_select_related = ["org"]
    list_filter = ["org"]
    search_fields = ["name"]

    def lookup_allowed(self, lookup, value, request=None):
        # No query string may ask about the value: ?sealed__regex= would answer, a character at
        # a time, whatever the ciphertext gives away. The field answers no lookup either.
        if lookup.split("__")[0] == "sealed":
            return False
        return super().lookup_allowed(lookup, value, request)


@admin.register(Run)
class RunAdmin(ListsThatMayFail):
    list_display = ["name", "org", "status", "points", "exit_code", "created", "ended"]
    list_select_related = ["org"]
    list_filter = ["status", "org"]
    list_per_page = 50
    readonly_fields = [
        "org",
        "status",
        "command",
        "exit_code",
        "created",
        "started",
        "ended",
        "offset",
        "points",
        "sealed",
        "point_list",
        "telemetry_closed",
        "in_long_line",
        "lease_owner",
        "lease_until",
        "home",
        "remote",
        "creator",
    ]
    fields = readonly_fields
    inlines = [LayoutInline, KeyInline, DropInline]

    def has_add_permission(self, request):
        return False

    @admin.display(description="Point list")
    def point_list(self, run: Run) -> str:
        url = reverse("admin:telemetry_run_points", args=[run.pk])
        return format_html('<a href="{}">{} points</a>', url, run.points)

    def get_urls(self):
        points = self.admin_site.admin_view(require_GET(self.points_view))
        own = [path("<int:run_id>/points/", points, name="telemetry_run_points")]
        return own + super().get_urls()

    def points_view(self, request, run_id: int):
        """A run's points, a page at a time, read as div telemetry --json reads them: a page
        costs its own points, however many the run has. Read-only, like the rest."""
        run = Run.objects.filter(pk=run_id).first()
        if run is None:
            raise Http404
        if not self.has_view_permission(request, run):
            raise PermissionDenied
        pages = max(1, -(-run.points // POINTS_A_PAGE))
        try:
            page = min(max(1, int(request.GET.get("page", 1))), pages)
        except ValueError:
            page = 1
        after = (page - 1) * POINTS_A_PAGE
        found = queries.points(run.pk, after=after, upto=min(run.points, after + POINTS_A_PAGE))
        context = {
            **self.admin_site.each_context(request),
            "title": f"Points of {run}",
            "opts": self.model._meta,
            "original": run,
            "points": [(seq, json.dumps(data)) for seq, data in found],
            "page": page,
            "pages": pages,
        }
        return TemplateResponse(request, "admin/telemetry/run/points.html", context)


@admin.register(Token)
class TokenAdmin(ListsThatMayFail):
    """Tokens listed and revoked (deleted); never made here, since a token's text is shown
    once to whoever makes it, and never shown, filtered or searched by its digest."""

    list_display = ["name", "user", "created", "last_used"]
    list_select_related = ["user"]
    search_fields = ["name", "user__username"]
    fields = ["user", "name", "created", "last_used"]
    readonly_fields = fields
    list_per_page = 50

    def lookup_allowed(self, lookup, value, request=None):
        if lookup.split("__")[0] == "digest":
            return False
        return super().lookup_allowed(lookup, value, request)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
