"""network.toml's [routing] (network/core/routing.py): every bad key and value named by
its path, values checked against the links, and the typed values FRR's file is written
from (Community, Secret)."""
import pytest

from network.core import normalise
from network.core.errors import NetworkError
from tusklib.values import Community, Refused, Secret

LINKS = """
[[interfaces]]
name = "eth1"
role = "management"
addresses = ["192.0.2.1/24"]

[[interfaces]]
name = "eth2"
addresses = ["10.1.0.1/24", "2001:db8:1::1/64"]

[[interfaces]]
name = "eth3"
role = "unused"
"""


def problems(text):
    with pytest.raises(NetworkError) as refused:
        normalise.parse(LINKS + text, path="n.toml")
    return {p.path.removeprefix("n.toml: "): p.message for p in refused.value.problems}


def test_a_good_routing_section_reads_back_as_written():
    config = normalise.parse(LINKS + """
[routing]
bfd_multiplier = 5
[routing.bgp]
asn = 4200000000
prefixes = ["198.51.100.0/24"]
communities = ["65535:65281", "65001:7"]
[[routing.bgp.neighbours]]
address = "10.1.0.2"
remote_as = 65010
password = "k3y"
[[routing.ospf]]
interface = "eth2"
area = "51"
""")
    assert config.routing.enabled
    assert config.routing.bgp.neighbours[0].password == "k3y"
    assert "k3y" not in repr(config)
    assert normalise.parse(normalise.to_toml(config)) == config
    assert not normalise.parse(LINKS).routing.enabled
    assert "[routing]" not in normalise.to_toml(normalise.parse(LINKS))


def test_unknown_and_mistyped_keys_are_named():
    found = problems("""
[routing]
router = "x"
[routing.bgp]
asn = "65001"
[[routing.bgp.neighbours]]
address = "10.1.0.2"
[[routing.ospf]]
interface = "eth2"
cost = true
""")
    assert set(found) == {"routing.router", "routing.bgp.asn",
                          "routing.bgp.neighbours[0].remote_as", "routing.ospf[0].cost"}


def test_bad_values_are_named_each_with_its_reason():
    found = problems("""
[routing]
router_id = "2001:db8::1"
bfd_interval = 5
[routing.bgp]
asn = 0
prefixes = ["10.0.0.1/8", "10.0.0.0/8", "10.0.0.0/8"]
communities = ["65536:1", "no-export"]
[[routing.bgp.neighbours]]
address = "10.9.0.2"
remote_as = 65010
password = "with space"
accept = ["2001:db8::/32"]
[[routing.bgp.neighbours]]
address = "10.1.0.1"
remote_as = 65010
[[routing.ospf]]
interface = "eth3"
area = "0.0.0.0.0"
cost = 70000
""")
    assert "IPv4" in found["routing.router_id"]
    assert "10..60000" in found["routing.bfd_interval"]
    assert "AS number" in found["routing.bgp.asn"]
    assert "host bits" in found["routing.bgp.prefixes[0]"]
    assert "twice" in found["routing.bgp.prefixes[2]"]
    assert "0-65535" in found["routing.bgp.communities[0]"]
    assert "single-hop" in found["routing.bgp.neighbours[0].address"]
    assert "not shown" in found["routing.bgp.neighbours[0].password"]
    assert "with space" not in found["routing.bgp.neighbours[0].password"]
    assert "IPv6" in found["routing.bgp.neighbours[0].accept[0]"]
    assert "own address" in found["routing.bgp.neighbours[1].address"]
    assert "not a routed traffic link" in found["routing.ospf[0].interface"]
    assert "OSPF area" in found["routing.ospf[0].area"]
    assert "0..65535" in found["routing.ospf[0].cost"]


def test_communities_are_written_as_frr_prints_them():
    assert str(Community("65535:65281")) == "no-export"
    assert str(Community("NO-EXPORT")) == "no-export"
    assert str(Community("65535:666")) == "blackhole"
    assert str(Community("65001:07")) == "65001:7"
    for bad in ("65001", "1:2:3", "65001:100\n", "-1:2", "no export"):
        with pytest.raises(Refused):
            Community(bad)


def test_a_secret_is_one_word_of_a_fixed_set_and_never_shown():
    assert str(Secret("a-b_c.d,e:f;g+h=i/j@k%l^m*n~o")) == "a-b_c.d,e:f;g+h=i/j@k%l^m*n~o"
    assert repr(Secret("hidden")) == "Secret(<hidden>)"
    for bad in ("", "a b", "a\nb", "a!b", "a#b", "a?b", 'a"b', "x" * 81, "é"):
        with pytest.raises(Refused) as refused:
            Secret(bad)
        assert bad not in str(refused.value) or not bad


def test_a_box_without_frr_reports_it_not_running_and_announces_nothing():
    """The agent's network.routing and flows.blackholes tasks ask FRR every few seconds,
    also on a box (or an image) without it: that is FRR not running, not a failing task."""
    from network.core import frr
    from tusklib.commands import Runner
    missing = frr.SystemFrr(Runner("", {"vtysh": ["/nonexistent/vtysh"]}))
    assert frr.status(missing.run) == {"running": False, "sessions": [], "bfd": [],
                                       "ospf": []}
    assert frr.blackhole_routes(missing.run) == set()
