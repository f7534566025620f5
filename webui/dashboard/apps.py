from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """The dashboard: live counters the agent samples, and the health of each service."""

    name = "dashboard"
    verbose_name = "Dashboard"
