"""Golden plans of the lab's iproute2 backend: each network_iproute2/NN_case/ folder holds
network.toml (what the operator configured; its first comment lines say what the case
proves), live.json (the namespace's state: the output of facts.COMMANDS, by key, recorded
from a namespace of veths, or hand-made in ip's JSON shape where this host's kernel lacks
the link kind) and expected.txt (the plan, one command a line).

On a mismatch the failure shows `diff -u expected actual`; UPDATE_GOLDEN=1 rewrites the
expected files instead (then read the diff before committing it).
"""
import difflib
import json
import os
import shlex

import pytest

from network.core import facts, iproute2, normalise
from network.core.errors import Code, NetworkError

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "network_iproute2")
CASES = sorted(os.listdir(HERE))
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def load(case):
    config = normalise.load(os.path.join(HERE, case, "network.toml"))
    with open(os.path.join(HERE, case, "live.json"), encoding="utf-8") as handle:
        recorded = json.load(handle)
    live = facts.parse_live(**{key: json.dumps(recorded.get(key, [])) for key in facts.COMMANDS})
    return config, live


def rendered(plan):
    return "".join(shlex.join(argv) + "\n" for argv in plan)


@pytest.mark.parametrize("case", CASES)
def test_plan_matches_expected(case):
    config, live = load(case)
    actual = rendered(iproute2.plan(config, live))
    path = os.path.join(HERE, case, "expected.txt")
    if UPDATE:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(actual)
    with open(path, encoding="utf-8") as handle:
        expected = handle.read()
    assert actual == expected, "".join(difflib.unified_diff(
        expected.splitlines(True), actual.splitlines(True), f"{case}/expected.txt", "actual"))



def refusal(case, text):
    _, live = load(case)
    with pytest.raises(NetworkError) as error:
        iproute2.plan(normalise.parse(text), live)
    return [(p.code, p.path, p.message) for p in error.value.problems]


MANAGEMENT = '[[interfaces]]\nname = "mgmt"\nrole = "management"\n'


def test_dhcp_on_the_management_port_is_refused_in_the_lab():
    [(code, path, message)] = refusal("01_vlan_address_route", MANAGEMENT + "dhcp = true\n")
    assert (code, path) == (Code.APPLY, "interfaces[0].dhcp")
    assert "DHCPv4 needs a client running on the link" in message
    [(code, path, _)] = refusal("01_vlan_address_route", MANAGEMENT + "autoconf = true\n")
    assert (code, path) == (Code.APPLY, "interfaces[0].autoconf")


def test_a_port_the_namespace_lacks_is_refused_before_any_step():
    [(code, path, message)] = refusal(
        "01_vlan_address_route",
        MANAGEMENT + 'addresses = ["192.168.77.1/24"]\n[[interfaces]]\nname = "eth7"\n')
    assert (code, path) == (Code.INTERFACE, "interfaces[1].name")
    assert message == "'eth7': there is no such Ethernet port here (there are: mgmt, veth-c, " \
        "veth-s)"


def test_a_vlan_named_like_a_link_tusk_did_not_create_is_refused():
    """veth-c is a port; a VLAN of that name would need it deleted first."""
    [(code, path, message)] = refusal(
        "01_vlan_address_route",
        MANAGEMENT + 'addresses = ["192.168.77.1/24"]\n[[interfaces]]\nname = "veth-s"\n'
        '[[vlans]]\nname = "veth-c"\nparent = "veth-s"\nid = 5\n')
    assert (code, path) == (Code.APPLY, "vlans[0].name")
    assert message == "a link named veth-c (veth) exists that Tusk did not create; remove it " \
        "or choose another name"
