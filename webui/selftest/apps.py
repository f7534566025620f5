from django.apps import AppConfig


class SelftestConfig(AppConfig):
    name = "selftest"
    verbose_name = "Self-test"
    default_auto_field = "django.db.models.BigAutoField"
