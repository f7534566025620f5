from django.apps import AppConfig


class TuningConfig(AppConfig):
    """The Tuning page: tusk-tune's plan, apply, verify and rollback as agent jobs. Its
    core/ package and cli.py are plain Python: tusk-tune runs them without Django."""

    name = "tuning"
    verbose_name = "Tuning"
