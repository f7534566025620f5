from django.apps import AppConfig


class BackupConfig(AppConfig):
    """Backup and restore of the configuration: the policy, the tuning profile and
    the users, as one JSON document (document.py), restored in one transaction
    (restore.py) with the policy applied and the tuning written by agent jobs."""

    name = "backup"
    verbose_name = "Backup"
