from django.apps import AppConfig


class JobsConfig(AppConfig):
    """The job queue between the unprivileged web process and the privileged agent
    (tusk-agent): jobs are rows in PostgreSQL, announced with NOTIFY."""

    name = "jobs"
    verbose_name = "Jobs"
