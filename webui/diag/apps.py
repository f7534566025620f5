from django.apps import AppConfig


class DiagConfig(AppConfig):
    name = "diag"
    verbose_name = "Diagnostics"
    default_auto_field = "django.db.models.BigAutoField"
