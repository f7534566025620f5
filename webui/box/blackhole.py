"""Black-hole routing (issue 39, RFC 7999): a block of the IDS hook (flows/core/hook.py)
for one host - a /32 or a /128 - announced to the BGP neighbours that take black-hole
routes (network's routing.bgp.neighbours[].blackhole), for as long as the block lasts.
It links two domains - the hook's sets and the network's FRR - so it lives here.

The route is staticd's, `ip route 203.0.113.66/32 blackhole tag 666`, added and taken
away at run time through vtysh: BGP redistributes staticd's routes of that tag only, with
BLACKHOLE and NO_EXPORT set, and only the black-hole neighbours' route-map passes them
(network/core/frr.py). A network apply keeps them (LabFrr.apply reloads FRR with the
rendered file and these lines). The hook's set is the clock: expire() takes away every
announced route whose block is no longer in the set (its timeout ran out, or a reboot
emptied it), so an announcement never outlives its block by more than the agent's period.

    announced(run)           -> {IPNetwork}: what FRR holds now (frr.blackhole_routes)
    announce(run, prefix)    the route added (idempotent)
    withdraw(run, prefix)
    expire(run, listing)     -> [withdrawn]: listing is `nft -j list table inet tusk_hook`
    takers(config)           -> the black-hole neighbours of a network configuration

run(name, *args) runs vtysh (network/core/frr.py's LabFrr.run, or the appliance's)."""
import ipaddress

from flows.core import hook
from network.core import frr
from tusklib.values import IPNetwork


class BlackholeError(Exception):
    """FRR refused a change; says which."""


announced = frr.blackhole_routes


def _configure(run, command):
    result = run("vtysh", "-c", "configure terminal", "-c", command)
    if result.returncode != 0 or result.stdout.strip().startswith("%"):
        raise BlackholeError(f"FRR refused `{command}`: "
                             f"{(result.stderr or result.stdout).strip()[:200]}")


def announce(run, prefix):
    if not prefix.is_host:
        raise BlackholeError(f"{prefix}: only a /32 or a /128 is announced")
    _configure(run, frr.blackhole_line(prefix))


def withdraw(run, prefix):
    _configure(run, frr.blackhole_line(prefix, remove=True))


def blocked(listing):
    """The host prefixes in the hook's block sets now."""
    found = set()
    for entry in hook.entries(listing):
        if entry["set"] not in hook.PREFIX_SETS["block"] or not isinstance(entry["key"], str):
            continue
        try:
            network = ipaddress.ip_network(entry["key"])
        except ValueError:
            continue
        found.add(IPNetwork(str(network)))
    return found


def expire(run, listing, config=None):
    """Takes away each announced route whose block is gone - but those config (the
    confirmed network configuration) announces always. -> the prefixes withdrawn."""
    always = {IPNetwork(p) for p in config.routing.bgp.blackholes} if config else set()
    gone = sorted(announced(run) - blocked(listing) - always, key=str)
    for prefix in gone:
        withdraw(run, prefix)
    return gone


def takers(config):
    """The addresses of config's (a network model.NetworkConfig, or None) neighbours
    that take black-hole routes."""
    if config is None:
        return []
    return [n.address for n in config.routing.bgp.neighbours if n.blackhole]
