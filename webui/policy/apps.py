from django.apps import AppConfig


class PolicyConfig(AppConfig):
    """The policy engine. Its core/ package is plain Python: the CLI and the tests
    use it without Django or a database."""

    name = "policy"
    verbose_name = "Policy"

    def ready(self):
        from . import readers  # noqa: F401  (registers its part of the box's snapshot: not
        #                                      before Django's apps are ready, as its models)
