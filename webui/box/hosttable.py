"""Table inet tusk_host, what may reach the firewall itself, built in one place. It follows
three domains (dependents.py): the network configuration's management port, where the
dashboard answers, and its routing (BGP, BFD and OSPF from the neighbours), the HA
pair's VRRP segments and sync link, and the SNMP agent's prefixes. Boot loads it first
(appliance/boot.py); afterwards every change of any of them - applied, confirmed back by
a rollback, a cancel or the watchdog - loads it again here, with the others' parts as
they are: the management port the loaded table admits and network.toml's routing, the
pair of ha.toml, the prefixes of snmp.toml.

It is rendered by policy/core/render_boot.host and loaded as boot loads it: nft -c, then
one nft -f, under the policy applier's lock. nft runs from the command table
(tusklib/commands.py): under --root only when TUSK_COMMANDS names it (the tests give it a
namespace's nft). With no tusk_host table loaded (boot has not loaded it yet, or the
lockdown table stands in) nothing is loaded.
"""
import re
import subprocess

from ha.core import config as ha_config
from network.core import normalise as network_normalise
from network.core.errors import NetworkError
from policy.core import render_boot
from policy.core.applier import Applier
from policy.core.errors import PolicyError
from snmp.core import config as snmp_config
from tusklib.commands import CommandError
from tusklib.names import FAMILY, HOST_TABLE
from tusklib.target import CommandResult, Target

POLICY_STATE_DIR = "/var/lib/tusk/policy"   # the appliance's policy store: its lock
# the rule of table inet tusk_host that admits the dashboard (render_boot.host)
MANAGEMENT_RULE = re.compile(r'iifname "([^"]+)" tcp dport .*comment "tusk: management"')
LOADED = object()   # follow(): that part as it is now


class HostTableError(Exception):
    """The kernel or the policy's lock refused the table; nothing of it was loaded."""


class HostTable(Target):
    """The host's nft through the command table, as a Target the policy applier loads
    with (no namespace, no tool check: the command table has them)."""

    def __init__(self, runner):
        self.runner = runner
        self.netns = None

    def run(self, argv, stdin=None):
        proc = subprocess.run(self.runner.argv(*argv), input=stdin, capture_output=True,
                              text=True)
        return CommandResult(proc.returncode, proc.stdout, proc.stderr)

    def management(self):
        """The port the loaded table admits the dashboard on ("" none), or None when
        there is no table or nft cannot be asked."""
        try:
            result = self.run(["nft", "list", "table", FAMILY, HOST_TABLE])
        except (CommandError, OSError):
            return None
        if not result.ok:
            return None
        found = MANAGEMENT_RULE.search(result.stdout)
        return found.group(1) if found else ""


def routing_in_effect(runner):
    """network.toml's routing, or None when it cannot be read (then the network's own
    check has said why, and no FRR runs)."""
    try:
        return network_normalise.load(runner.path(network_normalise.DEFAULT_PATH)).routing
    except NetworkError:
        return None


def follow(runner, management=LOADED, ha=LOADED, routing=LOADED, snmp=LOADED):
    """Loads the host table for management (a port name, "" for none), ha (an HA pair's
    HaConfig, or None), routing (network.toml's Routing, or None) and snmp (an
    SnmpConfig), each LOADED for what is in effect. Returns the port the table admitted
    before, or None when no host table is loaded (and none is loaded now).
    HostTableError when it is refused."""
    table = HostTable(runner)
    loaded = table.management()
    if loaded is None:
        return None
    port = loaded if management is LOADED else management
    if ha is LOADED:
        ha, _ = ha_config.enabled(runner.path(ha_config.DEFAULT_PATH))
    if routing is LOADED:
        routing = routing_in_effect(runner)
    if snmp is LOADED:
        snmp, _ = snmp_config.in_force(runner.path(snmp_config.DEFAULT_PATH))
    applier = Applier(runner.path(POLICY_STATE_DIR))
    applier.target = table   # its nft, as boot's is the system's
    try:
        applier.check_and_load(render_boot.host(port or None, ha, routing, snmp))
    except PolicyError as error:
        raise HostTableError(error.problems[0].message) from None
    return loaded
