"""The appliers of the appliance: each domain's core applier with what follows it
(dependents.py) wired in. tusklib.commit's watchdog starts these (DOMAINS), so a rollback
it makes puts the followers back too; the agent, tusk-net and tusk-boot use them. In the
lab (a namespace: netns set) nothing follows - its fw has no host table. Nothing follows
the policy: its applier is policy.core.applier's own.
"""
from ha.core import applier as ha_applier
from ha.core.config import Code as HaCode
from ha.core.config import HaError
from network.core import applier as network_applier
from network.core import normalise as network_normalise
from network.core.errors import Code as NetworkCode
from network.core.errors import NetworkError
from snmp.core import applier as snmp_applier
from snmp.core.config import Code as SnmpCode
from snmp.core.config import SnmpError
from tusklib.commands import Runner

from . import hosttable

NETWORK_PATH = network_normalise.DEFAULT_PATH


class NetworkApplier(network_applier.NetworkApplier):
    follows = ("hosttable",)   # dependents.followers("network"): a test holds them equal

    def follow(self, config, lines):
        """The host table admits the dashboard on config's management port and routing
        from config's neighbours and OSPF links; NetworkError(APPLY) when it is refused
        (nothing changed)."""
        if self.runner is None:
            return
        port = config.management.name if config.management else ""
        try:
            loaded = hosttable.follow(self.runner, management=port, routing=config.routing)
        except hosttable.HostTableError as error:
            raise NetworkError(NetworkCode.APPLY, "", "table inet tusk_host could not follow "
                               f"the management port to {port or '(none)'}: {error}") \
                from None
        if loaded is None or loaded == port:
            return
        lines.append(f"host table: the dashboard answers on {port or 'no port'} "
                     f"(was {loaded or 'none'})")


class HaApplier(ha_applier.HaApplier):
    follows = ("hosttable",)   # dependents.followers("ha")

    def follow(self, config):
        """The host table admits VRRP on config's segments and the peer's sync, for the
        management port the loaded table admits."""
        if self.netns is not None:
            return []
        try:
            loaded = hosttable.follow(Runner(""), ha=config)
        except hosttable.HostTableError as error:
            raise HaError(HaCode.APPLY, "", "table inet tusk_host could not admit the pair's "
                          f"VRRP and sync: {error}") from None
        if loaded is None:
            return ["host table: not loaded yet; boot loads it with the pair's lines"]
        return [f"host table: VRRP and the peer's sync {'admitted' if config else 'removed'}"]

    def own_addresses(self, config):
        """The box's own addresses conntrackd ignores: network.toml's on the appliance."""
        if config is None or self.netns is not None:
            return super().own_addresses(config)
        try:
            return [a for link in network_normalise.load(NETWORK_PATH).links
                    for a in link.addresses]
        except Exception:   # noqa: BLE001 - no usable network.toml: none to add
            return ()


class SnmpApplier(snmp_applier.SnmpApplier):
    follows = ("hosttable",)   # dependents.followers("snmp")

    def follow(self, config):
        """The host table admits SNMP from config's prefixes, before snmpd starts."""
        try:
            loaded = hosttable.follow(Runner(""), snmp=config)
        except hosttable.HostTableError as error:
            raise SnmpError(SnmpCode.APPLY, "", "table inet tusk_host could not admit SNMP "
                            f"from {', '.join(config.prefixes()) or 'nowhere'}: {error}") \
                from None
        if loaded is None:
            return ["host table: not loaded yet; boot loads it with SNMP's prefixes"]
        return [f"host table: SNMP from {', '.join(config.prefixes()) or 'nowhere'}"]
