"""URL configuration of the Tusk web UI."""
from django.urls import include, path

urlpatterns = [
    path("", include("dashboard.urls")),
    path("accounts/", include("accounts.urls")),
    path("policy/", include("policy.urls")),
    path("network/", include("network.urls")),
    path("ha/", include("ha.urls")),
    path("jobs/", include("jobs.urls")),
    path("tuning/", include("tuning.urls")),
    path("diag/", include("diag.urls")),
    path("selftest/", include("selftest.urls")),
    path("backup/", include("backup.urls")),
    path("system/", include("system.urls")),
    path("logs/", include("logs.urls")),
    path("flows/", include("flows.urls")),
    path("", include("metrics.urls")),   # /metrics, the scrape, and /metrics/tokens/
]
