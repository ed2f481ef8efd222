from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path, re_path

from telemetry import api, client_api, views

admin.autodiscover()

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("runs/<str:name>/", views.run_page, name="run"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("login/<str:uidb64>/<str:token>/", views.login_link, name="login-link"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/runs/", client_api.runs, name="api-runs"),
    path("api/runs/listing/", client_api.listing, name="api-listing"),
    path("api/runs/search/", api.runs_search, name="api-runs-search"),  # before a run's name
    path("api/runs/<str:name>/", api.run_detail, name="api-run"),
    path("api/runs/<str:name>/keys/", api.run_keys, name="api-keys"),
    path("api/runs/<str:name>/points/", api.run_points, name="api-points"),
    path("api/runs/<str:name>/series/", api.run_series, name="api-series"),
    path("api/runs/<str:name>/panels/", api.run_panels, name="api-panels"),
    path("api/runs/<str:name>/log/", api.run_log, name="api-log"),
    path("api/runs/<str:name>/log/screen/", api.run_screen, name="api-log-screen"),
    path("api/runs/<str:name>/files/", client_api.files, name="api-files"),
    re_path(
        r"^api/runs/(?P<name>[^/]+)/files/(?P<kind>telemetry|log)/$",
        client_api.upload,
        name="api-upload",
    ),
    path("api/runs/<str:name>/heartbeat/", client_api.heartbeat, name="api-heartbeat"),
    path("api/runs/<str:name>/end/", client_api.end, name="api-end"),
    path("api/runs/<str:name>/log/bytes/", client_api.log_bytes, name="api-log-bytes"),
    path("api/me/", client_api.me, name="api-me"),
    path("api/orgs/<str:org>/secrets/", client_api.secret_names, name="api-secrets"),
    path("api/orgs/<str:org>/secrets/<str:name>/", client_api.secret, name="api-secret"),
    path("api/tokens/", client_api.tokens, name="api-tokens"),
    path("api/tokens/<str:name>/", client_api.token, name="api-token"),
    path("account/", views.account, name="account"),
    path("admin/", admin.site.urls),
    # A comparison of runs: /compare/?runs=run-3,run-7
    path("compare/", views.compare_page, name="compare"),
    path("api/compare/", api.compare, name="api-compare"),
    path("api/compare/panels/", api.compare_panels, name="api-compare-panels"),
]
