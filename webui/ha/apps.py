from django.apps import AppConfig


class HaConfig(AppConfig):
    """High availability: this box's half of a pair (keepalived's VRRP addresses,
    conntrackd's state sync). Its core/ package is plain Python (the document, the
    renderer, the commit-confirm applier, the status parser): tusk-boot and the tests use
    it without Django."""

    name = "ha"
    verbose_name = "High availability"

    def ready(self):
        # each registers the pair's part: the rows of the health panel, its part of the
        # box's snapshot - not before Django's apps are ready, as its models
        from . import health, readers  # noqa: F401
