"""The rules that link the policy and the network, checked where they meet: each zone
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
"""
from network.core import validate
from network.core.validate import nat_problems, zone_problems
from policy.core.errors import Code, PolicyError, Problem
from policy.core.nat import first_class_taking, network_facts, taken_first
from policy.core.normalise import load_policy

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
        for code, problems in ((Code.INTERFACE, zone_problems(config, zones)),
                               (Code.CONTRADICTION, nat_problems(
                                   config, zones, forwards, masquerades, taken_first(policy)))):
            for path, message in problems:
                if which == PENDING:
                    message += " (in the network change that awaits confirmation)"
                found.setdefault(path, Problem(code, path, message))
    return list(found.values())


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
