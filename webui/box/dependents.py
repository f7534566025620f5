"""What follows what, as data (VyOS's configdep.py does the same for its conf_mode
scripts): a part of the box named here is put into effect again, after the domain it
follows has changed - in the same apply, under its lock, and in every rollback, cancel and
watchdog restore of that domain, so the two can never disagree.

    FOLLOWS = {"hosttable": ("network", "ha", "snmp")}

reads: table inet tusk_host follows the network configuration (the management port the
dashboard answers on), the HA pair (VRRP on its segments, the peer's sync) and the SNMP
agent (UDP 161 from its prefixes). A test
checks the graph is acyclic; order() is the order a full apply puts the parts in.
"""
from graphlib import CycleError, TopologicalSorter

DOMAINS = ("policy", "network", "ha", "tuning", "snmp")

FOLLOWS = {
    # the host table admits the dashboard on network's management port, the pair's
    # VRRP and sync, and SNMP from its prefixes (hosttable.py)
    "hosttable": ("network", "ha", "snmp"),
}


def followers(domain, follows=None):
    """The parts that follow domain, directly or through another part, in order."""
    follows = FOLLOWS if follows is None else follows
    found = []
    for part in order(follows):
        if part not in DOMAINS and any(
                source == domain or source in found for source in follows.get(part, ())):
            found.append(part)
    return found


def order(follows=None):
    """Every domain and part, each after what it follows; ValueError naming the cycle when
    the graph has one."""
    follows = FOLLOWS if follows is None else follows
    graph = {domain: () for domain in DOMAINS}
    graph.update(follows)
    try:
        return list(TopologicalSorter(graph).static_order())
    except CycleError as error:
        raise ValueError(f"what follows what has a cycle: {' -> '.join(error.args[1])}") \
            from None
