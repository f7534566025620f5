from django.apps import AppConfig


class NetworkConfig(AppConfig):
    """The box's network: interfaces, VLANs, bonds, routes, host name, DNS, NTP and time
    zone. Its core/ package is plain Python (the model, the checks, the backends and the
    commit-confirm applier): tusk-net, the console menu and the tests use it without
    Django."""

    name = "network"
    verbose_name = "Network"

    def ready(self):
        from . import health, readers  # noqa: F401  (register the health panel's routing
        #  rows and its part of the box's snapshot: not before Django's apps are ready)
