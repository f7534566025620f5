from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Users and their roles (admin changes things, viewer only looks), login
    throttling and the audit log."""

    name = "accounts"
    verbose_name = "Accounts"
