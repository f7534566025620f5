from django.apps import AppConfig


class HaConfig(AppConfig):
    """High availability: this box's half of a pair (keepalived's VRRP addresses,
    conntrackd's state sync). Its core/ package is plain Python (the document, the
    renderer, the commit-confirm applier, the status parser): tusk-boot and the tests use
    it without Django."""

    name = "ha"
    verbose_name = "High availability"

    def ready(self):
        from . import health  # noqa: F401  (registers the pair's rows of the health panel:
        #                                    not before Django's apps are ready, as its models)
