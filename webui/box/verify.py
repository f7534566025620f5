"""The rules that link domains, checked where they meet. The policy and the network: each zone
interface must be a traffic link of the box's network, a NAT rule must be one the
network can carry (network.core.validate's zone_problems and nat_problems), and a class
between links of different MTU should clamp MSS (mtu_warnings). Used by the
policy's draft in the web process and by its jobs in the agent, each with the network
part of its own snapshot (snapshot.py).

A forward's traffic goes to the server's zone, which only the network knows: with a
network, the first class that takes it there must be the forward's own; without one (a
machine tusk-net does not manage), a class to some zone that would drop, reject or
untrack it there is refused too, before a forward's class to any zone
(policy.core.nat.first_class_taking).

The HA pair and the network: the sync link and every segment with virtual addresses must
be a link the network carries traffic on (a traffic port outside a bond, a bond or a
VLAN) - not the management port, not an unused port whose link stays down, nor a
missing one. Checked from both sides: HA's apply (ha_problems: the pair's paths) and
the network's (pair_link_problems: the network's paths, so a VLAN the pair uses cannot be
deleted nor its port made unused). A cluster's box (docs/SCALE.md) routes: BGP or
OSPF, never standby - checked from both sides too (ha_routing_problems,
pair_routing_problems).
"""
from ha.core.config import SECONDARY
from ha.core.config import Code as HaCode
from network.core import validate
from network.core.errors import Code as NetworkCode
from network.core.model import MANAGEMENT
from network.core.validate import nat_problems, zone_problems
from policy.core.errors import Code, PolicyError, Problem
from policy.core.nat import first_class_taking, network_facts, taken_first
from policy.core.normalise import load_policy
from tusklib.names import DEFAULT_VLAN

from .paths import policy_paths
from .snapshot import PENDING


def network_problems(policy, networks):
    """[Problem] of policy (a policy.core Policy) against networks (a snapshot's network
    part: (which, NetworkConfig) pairs). A place wrong in both is named once."""
    zones = [(zone.name, zone.interfaces) for zone in policy.zones]
    forwards, masquerades = network_facts(policy)
    found = {}
    if not networks:
        for index, forward in enumerate(policy.nat.forwards):
            taking = first_class_taking(policy, forward)
            if taking is not None:
                path = f"nat.forwards[{index}].class"
                found[path] = Problem(Code.CONTRADICTION, path, taking.reason())
    for which, config in networks:
        for code, problems in ((Code.INTERFACE, zone_problems(config, zones,
                                                              policy.bridged_zones)
                                + zone_vlan_problems(config, policy)),
                               (Code.CONTRADICTION, nat_problems(
                                   config, zones, forwards, masquerades, taken_first(policy)))):
            for path, message in problems:
                if which == PENDING:
                    message += " (in the network change that awaits confirmation)"
                found.setdefault(path, Problem(code, path, message))
    return list(found.values())


def zone_vlan_problems(config, policy):
    """[(path, message)] of the VLANs a bridged zone names (policy: a policy.core Policy)
    against config (a NetworkConfig): its ports' bridge must be VLAN-aware and carry each
    of them (its vlans, or the default VLAN 1 of its untagged frames). Paths are the
    policy's (zones[0].vlans[1]); a port that is no bridge's is zone_problems' to name."""
    problems = []
    for zone_index, zone in enumerate(policy.zones):
        bridges = sorted({config.bridge_of[n] for n in zone.interfaces
                          if n in config.bridge_of})
        if not zone.vlans or len(bridges) != 1:
            continue
        bridge = config.link(bridges[0])
        if not bridge.vlans:
            problems.append((f"zones[{zone_index}].vlans", (
                f"zone {zone.name} names VLANs, and the bridge {bridge.name} is not "
                "VLAN-aware: give the bridge its VLANs on Network → Bridges, or leave "
                "the zone's VLANs out")))
            continue
        for index, vid in enumerate(zone.vlans):
            if vid != DEFAULT_VLAN and vid not in bridge.vlans:
                problems.append((f"zones[{zone_index}].vlans[{index}]", (
                    f"zone {zone.name}: the bridge {bridge.name} does not carry VLAN {vid} "
                    f"(its VLANs: {', '.join(map(str, bridge.vlans))}, and {DEFAULT_VLAN} "
                    "untagged); add it on Network → Bridges, or name one of those")))
    return problems


def mtu_warnings(config, policies):
    """network.core.validate.mtu_warnings of config along the paths of policies (a
    snapshot's policy documents), each warning once. A document that is no valid policy
    (a revision of an older release) adds none: the others' paths still count."""
    warnings = []
    for document in policies:
        try:
            paths = policy_paths(load_policy(document))
        except PolicyError:
            continue
        warnings += [w for w in validate.mtu_warnings(config, paths) if w not in warnings]
    return warnings


def ha_links(ha):
    """[(path in ha.toml, interface, what it is to the pair)] of ha (an HaConfig)."""
    return [("ha.sync_interface", ha.sync_interface, "the pair's sync link"),
            *((f"virtual[{index}].interface", segment.interface,
               f"the segment of virtual[{index}]") for index, segment in
              enumerate(ha.virtual))]


def _link_trouble(config, name, what):
    """Why name cannot be what to the pair in config (a NetworkConfig), or None."""
    if name in config.traffic_links:
        return None
    link = config.link(name)
    if link is None:
        return (f"{name} ({what}) is no interface of the network configuration; add it on "
                "Network → Interfaces (or VLANs, Bonds) first")
    if name in config.bond_of:
        return f"{name} ({what}) is a member of the bond {config.bond_of[name]}: use the bond"
    if link.role == MANAGEMENT:
        return (f"{name} ({what}) is the management port: the pair's VRRP and state sync "
                "stay off the port the dashboard answers on")
    return (f"{name} ({what}) has the role {link.role} in the network configuration (its "
            "link stays down): it must carry traffic")


def _bridge_loop(config, ha):
    """Why config's bridges cannot be on a box of ha (an HaConfig, enabled: a pair or a
    cluster), or None: the other boxes bridge the same segments, so each frame would
    cross twice - a loop that floods both sides - and no box holds its bridge closed
    while another forwards."""
    if not ha.enabled or not config.bridges:
        return None
    subject, others = (("this box is one of a cluster", "the other boxes") if ha.cluster
                       else ("this box is half of an HA pair", "the other box"))
    names = ", ".join(bridge.name for bridge in config.bridges)
    return (f"{subject}: {others} would bridge the same segments as {names}, so every "
            "frame would cross twice - a loop; a transparent bridge runs on one box (a box "
            "that fails, fails closed: docs/NETWORK.md), and Tusk has no HA of bridges yet")


def ha_problems(ha, networks):
    """[Problem] (HA's codes and paths) of ha (an HaConfig) against networks (a snapshot's
    network part). No network configuration (a machine tusk-net does not manage): none.
    A box that bridges is in no pair nor cluster (_bridge_loop), named at ha.enabled."""
    found = {}
    for which, config in networks:
        loop = _bridge_loop(config, ha)
        if loop:
            if which == PENDING:
                loop += " (in the network change that awaits confirmation)"
            found.setdefault("ha.enabled", Problem(HaCode.NETWORK, "ha.enabled", loop +
                                                   "; remove the bridges first"))
        for path, name, what in ha_links(ha):
            reason = _link_trouble(config, name, what)
            if reason:
                if which == PENDING:
                    reason += " (in the network change that awaits confirmation)"
                found.setdefault(path, Problem(HaCode.NETWORK, path, reason))
    return list(found.values())


def pair_link_problems(config, pairs):
    """[Problem] (the network's codes and paths) of config (a NetworkConfig about to be
    saved or applied) against pairs (a snapshot's ha part): a link the pair uses that
    config drops or takes off traffic, named at that link; a bridge on a box of a pair
    or a cluster, named at the first bridge."""
    found = {}
    for _, ha in pairs:
        loop = ha is not None and _bridge_loop(config, ha)
        if loop:
            found.setdefault(("bridges[0]", ""), Problem(
                NetworkCode.HA, "bridges[0]", loop + "; turn HA off first (High "
                "availability)"))
        if ha is None:
            continue
        for _, name, what in ha_links(ha):
            reason = _link_trouble(config, name, what)
            if not reason:
                continue
            link = config.link(name)
            if link is None:
                path = ""
            else:
                key = validate.KIND_KEY[link.kind]
                index = getattr(config, key).index(link)
                path = f"{key}[{index}].role" if link.kind == "port" else f"{key}[{index}]"
            found.setdefault((path, name), Problem(
                NetworkCode.HA, path, f"this box's HA pair uses it: {reason}; change the "
                "pair first (High availability)"))
    return list(found.values())


def _standby_wanted(roles):
    """Whether routing must be standby for these HA roles, or None: no pair, or a role
    change under way (the draft's and the confirmed role differ) - no rule then."""
    roles = set(roles)
    if len(roles) != 1:
        return None
    return roles.pop() == SECONDARY


def _standby_reason(wanted):
    return ("this box is the HA pair's secondary: its routing must be standby (a longer AS "
            "path, OSPF cost 65535), or its neighbours send traffic to it as to the primary"
            if wanted else "this box is the HA pair's primary: its routing must not be "
            "standby, or its neighbours send traffic to the secondary")


def _cluster_routing_trouble(routing, subject):
    """(path in network.toml, why) routing cannot carry a cluster's box, or None; why
    begins with subject. The routers find each box, spread connections over them and
    drop a failed one through dynamic routing (docs/SCALE.md), and a standby box would
    be a spare, not a share."""
    if not routing.enabled:
        return ("routing", f"{subject}: the routers spread connections over its boxes, "
                "and leave a failed one, only by what each box announces - configure BGP "
                "(or OSPF) with BFD on Network -> Routing")
    if routing.standby:
        return ("routing.standby", f"{subject}: a standby box's longer AS path (or OSPF "
                "cost) makes it a spare that carries nothing while the others are up")
    return None


def pair_routing_problems(config, pairs):
    """[Problem] (the network's) of config's routing against this box's HA role (pairs: a
    snapshot's ha part): routing.standby is the secondary's, and only its; a cluster's
    box routes dynamically, never standby."""
    enabled = [ha for _, ha in pairs if ha is not None and ha.enabled]
    if any(ha.cluster for ha in enabled):
        trouble = _cluster_routing_trouble(
            config.routing, "this box is one of a cluster sharing the load")
        return [Problem(NetworkCode.HA, *trouble)] if trouble else []
    wanted = _standby_wanted(ha.role for ha in enabled)
    if wanted is None or not config.routing.enabled or config.routing.standby == wanted:
        return []
    return [Problem(NetworkCode.HA, "routing.standby", _standby_reason(wanted))]


def ha_routing_problems(ha, networks):
    """[Problem] (HA's) of ha against the network configurations' routing: the role a
    routing with (or without) standby needs, named at ha.role; a cluster's routing (BGP
    or OSPF, not standby), named at ha.mode."""
    if not ha.enabled:
        return []
    if ha.cluster:
        for which, config in networks:
            trouble = _cluster_routing_trouble(config.routing, "a cluster shares the load")
            if trouble:
                reason = trouble[1] + "; change it first"
                if which == PENDING:
                    reason += " (in the network change that awaits confirmation)"
                return [Problem(HaCode.NETWORK, "ha.mode", reason)]
        return []
    for which, config in networks:
        if config.routing.enabled and config.routing.standby != (ha.role == SECONDARY):
            reason = _standby_reason(ha.role == SECONDARY).replace(
                "its routing must", "the network's routing (Network -> Routing) must")
            if which == PENDING:
                reason += " (in the network change that awaits confirmation)"
            return [Problem(HaCode.NETWORK, "ha.role", reason + "; change it first")]
    return []


def bridged_zone_problems(config, policies):
    """[Problem] (the network's codes and paths) of config (a NetworkConfig about to be
    saved or applied) against policies (a snapshot's policy documents): a zone a policy
    marks bridged that config does not bridge, or a routed zone whose interfaces config
    makes a bridge's ports - named at the bridge, so that turning a bridge into routed
    ports (or back) waits for the zones to follow. A document that is no valid policy (a
    revision of an older release) adds none."""
    found = {}
    for document in policies:
        try:
            policy = load_policy(document)
        except PolicyError:
            continue
        zones = [(zone.name, zone.interfaces) for zone in policy.zones]
        for path, message in (zone_problems(config, zones, policy.bridged_zones)
                              + zone_vlan_problems(config, policy)):
            if not path.endswith(".bridged") and ".vlans" not in path:
                continue        # an interface that is gone: the zones' own check says so
            zone = policy.zones[int(path.split("[")[1].split("]")[0])]
            bridge = next((config.bridge_of[n] for n in zone.interfaces
                           if n in config.bridge_of), None)
            where = f"bridges[{[b.name for b in config.bridges].index(bridge)}]" \
                if bridge else ""
            if where and ".vlans" in path:
                where += ".vlans"
            found.setdefault((where, zone.name), Problem(
                NetworkCode.POLICY, where, f"the policy's {message}; change the zone first "
                "(Policy)"))
    return list(found.values())
