from django.urls import path, re_path

from telemetry.consumers import CompareConsumer, RunConsumer
from telemetry.dashboard import DashboardConsumer

websocket_urlpatterns = [
    path("ws/dashboard/", DashboardConsumer.as_asgi()),  # the rows on a dashboard's screen
    path("ws/runs/<str:name>/", RunConsumer.as_asgi()),
    path("ws/compare/<str:runs>/", CompareConsumer.as_asgi()),
    # Every other path too, to be closed with 4404 rather than fail in the router.
    re_path(r"", RunConsumer.as_asgi()),
]
