from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from telemetry import api, views

admin.autodiscover()

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("runs/<str:name>/", views.run_page, name="run"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("login/<str:uidb64>/<str:token>/", views.login_link, name="login-link"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/runs/", api.runs, name="api-runs"),
    path("api/runs/<str:name>/", api.run_detail, name="api-run"),
    path("api/runs/<str:name>/keys/", api.run_keys, name="api-keys"),
    path("api/runs/<str:name>/points/", api.run_points, name="api-points"),
    path("api/runs/<str:name>/series/", api.run_series, name="api-series"),
    path("api/runs/<str:name>/panels/", api.run_panels, name="api-panels"),
    path("api/runs/<str:name>/log/", api.run_log, name="api-log"),
    path("api/runs/<str:name>/log/screen/", api.run_screen, name="api-log-screen"),
    path("admin/", admin.site.urls),
    # A comparison of runs: /compare/?runs=run-3,run-7
    path("compare/", views.compare_page, name="compare"),
    path("api/compare/", api.compare, name="api-compare"),
    path("api/compare/panels/", api.compare_panels, name="api-compare-panels"),
]
