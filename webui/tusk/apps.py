from django.apps import AppConfig


class TuskConfig(AppConfig):
    """The Django project itself: settings, URLs, and the system checks of Tusk's own
    conventions (checks.py)."""

    name = "tusk"
    verbose_name = "Tusk"

    def ready(self):
        from . import checks  # noqa: F401  (registers the checks: Django's idiom)
