from django.apps import AppConfig


class SystemConfig(AppConfig):
    """The System page: the box's own settings that only root may write (the console
    password; later the upgrade), each changed by an agent job."""

    name = "system"
    verbose_name = "System"
