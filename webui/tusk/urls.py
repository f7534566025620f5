"""URL configuration of the Tusk web UI."""
from django.urls import include, path

from api.main import urls as api_urls

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
    path("snmp/", include("snmp.urls")),
    path("api/v1/", api_urls()),
    path("", include("metrics.urls")),   # /metrics, the scrape, and /metrics/tokens/
]
