from django.apps import AppConfig


class SnmpConfig(AppConfig):
    """The SNMP agent (net-snmp's snmpd): SNMPv3 users, an optional read-only community,
    Tusk's own counters (TUSK-MIB) through pass_persist. Its core/ package is plain
    Python (the document, the renderer, the commit-confirm applier, the MIB's table):
    tusk-boot and the tests use it without Django."""

    name = "snmp"
    verbose_name = "SNMP"
