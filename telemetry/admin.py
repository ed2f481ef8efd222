from __future__ import annotations

from django import forms
from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from telemetry import services
from telemetry.encryption import SecretsKeyError
from telemetry.models import Drop, Key, Layout, Membership, Org, Point, Run, Secret, Token


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
class OrgAdmin(admin.ModelAdmin):
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

    def clean_value(self) -> str:
        try:
            self.instance.sealed = services.secret_seal(value=self.cleaned_data["value"])
        except (services.SecretRefused, SecretsKeyError) as e:
            raise forms.ValidationError(str(e)) from None
        return ""  # the value itself goes no further than its encryption


@admin.register(Secret)
class SecretAdmin(admin.ModelAdmin):
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
class RunAdmin(admin.ModelAdmin):
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
        url = reverse("admin:telemetry_point_changelist") + f"?run__id__exact={run.pk}"
        return format_html('<a href="{}">{} points</a>', url, run.points)


@admin.register(Point)
class PointAdmin(admin.ModelAdmin):
    list_display = ["seq", "run", "data"]
    list_per_page = 100
    # Counting 200,000 rows on every page is what makes a large run slow to open.
    show_full_result_count = False
    ordering = ["run", "seq"]
    raw_id_fields = ["run"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("run")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Token)
class TokenAdmin(admin.ModelAdmin):
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
