from django.apps import AppConfig


class ApiConfig(AppConfig):
    """The REST API under /api/v1/ (docs/API.md): the same services the pages call, with
    a token or a session, described by the OpenAPI document it serves."""

    name = "api"
