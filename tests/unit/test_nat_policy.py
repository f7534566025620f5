"""NAT and logging in the policy engine (issue 19): every bad nat section, class log and
log setting is a PolicyError with the right code, the path of the field and a reason;
what holds a forward open is checked (its class accepts, tracks and matches the
translated traffic; no earlier class takes it); the model and the rendered rules carry
what the YAML says. Plain Python."""
import pytest

from policy.core import constants
from policy.core.errors import Code, PolicyError
from policy.core.model import Interval, Nat, PortForward, SourceNat
from policy.core.nat import first_class_taking, network_facts
from policy.core.normalise import load_policy, load_policy_text
from policy.core.render import class_mark, render
from tusklib import names

# zones inside/outside/dmz; a web server (v4 and v6) admitted by class web-in (classes[2]),
# after an inside-out class and a drop of telnet.
PRELUDE = """\
version: 1
zones:
  - {name: inside, interfaces: [eth1]}
  - {name: outside, interfaces: [eth2]}
  - {name: dmz, interfaces: [eth3]}
address_sets:
  - {name: inside-nets, entries: [10.1.0.0/16, "fd00:1::/48"]}
  - {name: v6-nets, entries: ["fd00:2::/48"]}
  - {name: web-server, entries: [10.3.0.5, "fd00:3::5"]}
  - {name: other-server, entries: [10.3.0.6]}
  - {name: empty}
services:
  - {name: https, protocol: tcp, ports: [443, 8443]}
  - {name: alt, protocol: tcp, ports: ["9000-9009"]}
  - {name: dns, protocol: udp, ports: [53]}
  - {name: telnet, protocol: tcp, ports: [23]}
classes:
  - {name: inside-out, from: inside, to: outside, action: accept}
  - {name: no-telnet, services: [telnet], action: drop}
  - {name: web-in, to: dmz, destination: [web-server], services: [https, alt], action: accept}
"""
WEB = ("{name: web, from: outside, address: 203.0.113.5, protocol: tcp, ports: [443], "
       "to_address: 10.3.0.5, class: web-in")


def nat(source=(), forwards=(), classes=""):
    """PRELUDE, extra classes (classes[3], ...), and a nat section of flow mappings."""
    text = PRELUDE + classes + "nat:\n"
    if source:
        text += "  source:\n" + "".join(f"    - {rule}\n" for rule in source)
    if forwards:
        text += "  forwards:\n" + "".join(f"    - {rule}\n" for rule in forwards)
    return text


def forward(extra="", base=WEB):
    return nat(forwards=[base + (", " + extra if extra else "") + "}"])


def masquerade(extra=""):
    return nat(source=["{name: out, to: outside, translate: masquerade"
                       + (", " + extra if extra else "") + "}"])


def snat(extra):
    return nat(source=["{name: out, to: outside, translate: address, " + extra + "}"])


# (id, yaml text, code, path, substring of the message) - the FIRST problem reported.
BAD = [
    # -- shape -------------------------------------------------------------------------
    ("nat-not-mapping", PRELUDE + "nat: [masquerade]\n", Code.SCHEMA, "nat",
     "must be a mapping, not a list"),
    ("nat-unknown-key", PRELUDE + "nat: {dnat: []}\n", Code.SCHEMA, "nat.dnat",
     "unknown key (allowed: forwards, source)"),
    ("source-not-list", PRELUDE + "nat: {source: {name: a}}\n", Code.SCHEMA, "nat.source",
     "must be a list, not a mapping"),
    ("source-missing-to", nat(source=["{name: out, translate: masquerade}"]), Code.SCHEMA,
     "nat.source[0].to", "is required"),
    ("source-null-to", nat(source=["{name: out, to: null, translate: masquerade}"]),
     Code.SCHEMA, "nat.source[0].to", "is required"),
    ("source-missing-translate", nat(source=["{name: out, to: outside}"]), Code.SCHEMA,
     "nat.source[0].translate", "is required"),
    ("source-unknown-key", masquerade("random: true"), Code.SCHEMA, "nat.source[0].random",
     "unknown key (allowed: address, comment, name, ports, source, to, translate)"),
    ("source-bad-translate", nat(source=["{name: out, to: outside, translate: snat}"]),
     Code.SCHEMA, "nat.source[0].translate", "'snat' is not one of: masquerade, address"),
    ("source-bad-name", nat(source=["{name: Out, to: outside, translate: masquerade}"]),
     Code.SCHEMA, "nat.source[0].name", "'Out' is not a valid name"),
    ("forward-missing-class", forward(base=WEB.replace(", class: web-in", "")), Code.SCHEMA,
     "nat.forwards[0].class", "is required"),
    ("forward-missing-ports", forward(base=WEB.replace(" ports: [443],", "")), Code.SCHEMA,
     "nat.forwards[0].ports", "is required"),
    ("forward-empty-ports", forward(base=WEB.replace("[443]", "[]")), Code.SCHEMA,
     "nat.forwards[0].ports", "must name at least one port"),
    ("forward-ports-not-list", forward(base=WEB.replace("[443]", "443")), Code.SCHEMA,
     "nat.forwards[0].ports", "must be a list, not a number"),
    ("forward-unknown-key", forward("to_zone: dmz"), Code.SCHEMA, "nat.forwards[0].to_zone",
     "unknown key (allowed: address, class, comment, from, hairpin, name, ports, "
     "protocol, to_address, to_ports)"),
    ("forward-bad-protocol", forward(base=WEB.replace("tcp", "icmp")), Code.SCHEMA,
     "nat.forwards[0].protocol", "'icmp' is not one of: tcp, udp, sctp, udplite"),
    ("forward-hairpin-not-bool", forward("hairpin: 'yes'"), Code.SCHEMA,
     "nat.forwards[0].hairpin", "must be true or false"),
    ("forward-to-ports-list", forward("to_ports: [8443]"), Code.SCHEMA,
     "nat.forwards[0].to_ports", "must be one port or one range a-b, not a list"),
    ("forward-bad-comment", forward("comment: 'a \"b\"'"), Code.SCHEMA,
     "nat.forwards[0].comment", "must not contain double quotes"),
    # -- references and duplicates ------------------------------------------------------
    ("source-unknown-zone", nat(source=["{name: out, to: wan, translate: masquerade}"]),
     Code.REFERENCE, "nat.source[0].to", "no zone is named 'wan'"),
    ("source-unknown-set", masquerade("source: [inside-nets, lan]"), Code.REFERENCE,
     "nat.source[0].source[1]", "no address set is named 'lan'"),
    ("forward-unknown-zone", forward(base=WEB.replace("from: outside", "from: wan")),
     Code.REFERENCE, "nat.forwards[0].from", "no zone is named 'wan'"),
    ("forward-unknown-class", forward(base=WEB.replace("web-in", "web-out")),
     Code.REFERENCE, "nat.forwards[0].class", "no class is named 'web-out'"),
    ("source-duplicate-name", nat(source=["{name: out, to: outside, translate: masquerade}",
                                          "{name: out, to: dmz, translate: masquerade}"]),
     Code.DUPLICATE, "nat.source[1].name", "'out' is already defined at nat.source[0]"),
    ("forward-duplicate-name", nat(forwards=[WEB + "}", WEB.replace("[443]", "[8443]") + "}"]),
     Code.DUPLICATE, "nat.forwards[1].name", "'web' is already defined at nat.forwards[0]"),
    # -- addresses, ports, families -----------------------------------------------------
    ("masquerade-with-address", masquerade("address: 203.0.113.5"), Code.CONTRADICTION,
     "nat.source[0].address", "only translate: address takes an address"),
    ("address-missing", nat(source=["{name: out, to: outside, translate: address}"]),
     Code.SCHEMA, "nat.source[0].address", "is required when translate is address"),
    ("snat-address-garbage", snat("address: 203.0.113.300"), Code.ADDRESS,
     "nat.source[0].address", "is not a valid IPv4 or IPv6 address"),
    ("snat-address-prefix", snat("address: 203.0.113.0/29"), Code.ADDRESS,
     "nat.source[0].address", "203.0.113.0/29 is a prefix, which holds its network"),
    ("snat-address-mixed-range", snat("address: 203.0.113.5-2001:db8::1"), Code.ADDRESS,
     "nat.source[0].address", "mixes IPv4 and IPv6"),
    ("snat-address-multicast", snat("address: 224.0.0.5"), Code.ADDRESS,
     "nat.source[0].address", "224.0.0.5 is not a unicast address of a host"),
    ("snat-family-of-sets", snat("address: 203.0.113.5, source: [v6-nets]"),
     Code.CONTRADICTION, "nat.source[0].address", "203.0.113.5 is IPv4, and the source sets "
     "hold only IPv6 addresses: a source NAT keeps the address family"),
    ("source-only-empty-sets", masquerade("source: [empty]"), Code.CONTRADICTION,
     "nat.source[0].source", "empty is empty, so the rule can never match"),
    ("snat-ports-above", masquerade("ports: '1024-65536'"), Code.RANGE,
     "nat.source[0].ports", "65536 is above 65535"),
    ("snat-ports-zero", snat("address: 203.0.113.5, ports: 0"), Code.RANGE,
     "nat.source[0].ports", "0 is below 1"),
    ("snat-ports-reversed", masquerade("ports: '2000-1000'"), Code.SCHEMA,
     "nat.source[0].ports", "'2000-1000' starts after it ends"),
    ("forward-port-above", forward(base=WEB.replace("[443]", "[443, 70000]")), Code.RANGE,
     "nat.forwards[0].ports[1]", "70000 is above 65535"),
    ("forward-to-ports-above", forward("to_ports: 65536"), Code.RANGE,
     "nat.forwards[0].to_ports", "65536 is above 65535"),
    ("forward-address-range", forward(base=WEB.replace("203.0.113.5", "203.0.113.5-203.0.113.6")),
     Code.ADDRESS, "nat.forwards[0].address", "203.0.113.5-203.0.113.6: the external "
     "address is one address, not a range or prefix"),
    ("forward-to-address-prefix", forward(base=WEB.replace("to_address: 10.3.0.5",
                                                           "to_address: 10.3.0.0/24")),
     Code.ADDRESS, "nat.forwards[0].to_address", "to_address is one address"),
    ("forward-to-address-loopback", forward(base=WEB.replace("to_address: 10.3.0.5",
                                                             "to_address: 127.0.0.1")),
     Code.ADDRESS, "nat.forwards[0].to_address", "127.0.0.1 is not a unicast address"),
    ("forward-family-mismatch", forward(base=WEB.replace("to_address: 10.3.0.5",
                                                         "to_address: 'fd00:3::5'")),
     Code.CONTRADICTION, "nat.forwards[0].to_address", "fd00:3::5 is IPv6 and the external "
     "address 203.0.113.5 is IPv4: a forward stays in one address family"),
    ("forward-range-length", forward(base=WEB.replace("[443]", "['8000-8009']"),
                                     extra="to_ports: '9000-9004'"),
     Code.CONTRADICTION, "nat.forwards[0].to_ports", "a range maps port by port, so ports "
     "must be a single range of the same length (5 ports); ports are 8000-8009"),
    ("forward-range-of-two-ranges", forward(base=WEB.replace("[443]", "['8000-8004', 8010]"),
                                            extra="to_ports: '9000-9005'"),
     Code.CONTRADICTION, "nat.forwards[0].to_ports", "(6 ports); ports are 8000-8004, 8010"),
    ("forward-range-too-long", forward(base=WEB.replace("[443]", "['1000-3000']"),
                                       extra="to_ports: '11000-13000'"),
     Code.RANGE, "nat.forwards[0].to_ports", "2001 ports is above 1024"),
    ("forward-hairpin-one-zone", "version: 1\nzones:\n  - {name: outside, interfaces: [eth2]}\n"
     "classes:\n  - {name: web-in, action: accept}\nnat:\n  forwards:\n    - " + WEB +
     ", hairpin: true}\n", Code.CONTRADICTION, "nat.forwards[0].hairpin",
     "the policy has no zone but outside"),
    # -- overlapping forwards -----------------------------------------------------------
    ("forwards-overlap", nat(forwards=[WEB + "}", WEB.replace("web,", "web2,").replace(
        "[443]", "['400-500']") + "}"]),
     Code.CONTRADICTION, "nat.forwards[1].ports", "tcp 443 to 203.0.113.5 is already "
     "forwarded by nat.forwards[0] 'web' (zone outside): the first forward that matches "
     "wins"),
    ("forwards-overlap-local", nat(forwards=[
        WEB.replace(" address: 203.0.113.5,", "") + "}",
        WEB.replace("web,", "web2,").replace(" address: 203.0.113.5,", "").replace(
            "[443]", "[80, 443]") + "}"]),
     Code.CONTRADICTION, "nat.forwards[1].ports", "tcp 443 to the box's own addresses"),
    ("forwards-overlap-hairpin", nat(forwards=[
        WEB + ", hairpin: true}",
        WEB.replace("web,", "web2,").replace("from: outside", "from: inside") + "}"]),
     Code.CONTRADICTION, "nat.forwards[1].ports", "(zone outside, hairpin)"),
    # -- the forward's class ------------------------------------------------------------
    ("class-drops", forward(base=WEB.replace("web-in", "no-telnet")), Code.CONTRADICTION,
     "nat.forwards[0].class", "class 'no-telnet' drops it: a forward needs a class that "
     "accepts"),
    ("class-notrack", forward(base=WEB.replace("web-in", "stateless"),
                              extra="to_ports: 8443").replace(
        "nat:", "  - {name: stateless, to: dmz, action: accept, notrack: true}\nnat:"),
     Code.CONTRADICTION, "nat.forwards[0].class", "class 'stateless' is notrack: a forward "
     "needs connection tracking"),
    ("class-other-zone", forward(base=WEB.replace("web-in", "inside-out")),
     Code.CONTRADICTION, "nat.forwards[0].class", "class 'inside-out' admits zone inside "
     "only, and this forward's traffic comes from zone outside"),
    ("class-hairpin-needs-any-zone", forward("hairpin: true", base=WEB.replace(
        "web-in", "web-outside")).replace(
        "nat:", "  - {name: web-outside, from: outside, destination: [web-server], "
                "action: accept}\nnat:"),
     Code.CONTRADICTION, "nat.forwards[0].class", "with hairpin, hosts of every zone reach "
     "the server through this forward, and class 'web-outside' admits zone outside only"),
    ("class-destination", forward(base=WEB.replace("to_address: 10.3.0.5",
                                                   "to_address: 10.3.0.7")),
     Code.CONTRADICTION, "nat.forwards[0].class", "the destination of class 'web-in' "
     "(web-server) does not hold 10.3.0.7: classes see the destination after translation"),
    ("class-services", forward("to_ports: 8080"), Code.CONTRADICTION, "nat.forwards[0].class",
     "the services of class 'web-in' (https, alt) do not admit tcp 8080, where the "
     "translated traffic goes"),
    ("class-services-protocol", forward(base=WEB.replace("tcp", "udp")), Code.CONTRADICTION,
     "nat.forwards[0].class", "do not admit udp 443"),
    ("class-services-part-of-range", forward(base=WEB.replace("[443]", "['9005-9014']"),
                                             extra="to_ports: '9005-9014'"),
     Code.CONTRADICTION, "nat.forwards[0].class", "do not admit tcp 9005-9014"),
    ("class-source-family", forward(base=WEB.replace("web-in", "v6-web")).replace(
        "nat:", "  - {name: v6-web, source: [v6-nets], destination: [web-server], "
                "action: accept}\nnat:"),
     Code.CONTRADICTION, "nat.forwards[0].class", "the source of class 'v6-web' holds no "
     "IPv4 address, and this forward is IPv4"),
    ("class-shadowed-by-reject", forward(base=WEB.replace("web-in", "later")).replace(
        "nat:", "  - {name: later, destination: [web-server], action: accept}\nnat:").replace(
        "  - {name: web-in,", "  - {name: web-in, action: reject, services: [https]}\n"
                              "  - {name: unused,"),
     Code.CONTRADICTION, "nat.forwards[0].class", "classes[2] 'web-in' comes first and "
     "matches all of this forward's traffic that class 'later' matches, and rejects it"),
    ("class-shadowed-by-accept", forward(base=WEB.replace("web-in", "later")).replace(
        "nat:", "  - {name: later, from: outside, to: dmz, source: [inside-nets], "
                "destination: [web-server], action: accept}\nnat:"),
     Code.CONTRADICTION, "nat.forwards[0].class", "classes[2] 'web-in' comes first and "
     "matches all of this forward's traffic that class 'later' matches, and accepts it "
     "itself, so class 'later' never sees it"),
    ("class-shadowed-by-notrack", forward(base=WEB.replace("web-in", "later")).replace(
        "nat:", "  - {name: later, to: dmz, source: [inside-nets], destination: [web-server], "
                "action: accept}\nnat:").replace(
        "  - {name: web-in,", "  - {name: raw, source: [inside-nets, v6-nets], "
                              "action: accept, notrack: true}\n  - {name: web-in,"),
     Code.CONTRADICTION, "nat.forwards[0].class", "and accepts it untracked (notrack)"),
    # -- source NAT and untracked classes ----------------------------------------------
    ("notrack-class-leaves-by-snat-zone", masquerade("source: [inside-nets]").replace(
        "nat:", "  - {name: raw, from: inside, action: accept, notrack: true}\nnat:"),
     Code.CONTRADICTION, "nat.source[0].to", "classes[3] 'raw' is notrack and its traffic "
     "can leave through zone outside: untracked packets are never translated"),
    # -- logging -----------------------------------------------------------------------
    ("log-not-bool", PRELUDE.replace("action: drop}", "action: drop, log: 1}"), Code.SCHEMA,
     "classes[1].log", "must be true or false, not 1"),
    ("log-default-deny-not-bool", "settings: {log_default_deny: 'no'}\n", Code.SCHEMA,
     "settings.log_default_deny", "must be true or false, not 'no'"),
    ("log-rate-zero", "settings: {log_rate: 0}\n", Code.RANGE, "settings.log_rate",
     "0 is below 1"),
    ("log-rate-above", "settings: {log_rate: 1001}\n", Code.RANGE, "settings.log_rate",
     "1001 is above 1000"),
    ("log-rate-text", "settings: {log_rate: fast}\n", Code.SCHEMA, "settings.log_rate",
     "must be a whole number, not 'fast'"),
]


@pytest.mark.parametrize("text, code, path, message", [case[1:] for case in BAD],
                         ids=[case[0] for case in BAD])
def test_bad_nat_or_log(text, code, path, message):
    with pytest.raises(PolicyError) as raised:
        load_policy_text(text)
    first = raised.value.problems[0]
    assert (first.code, first.path) == (code, path), raised.value.problems
    assert message in first.message, raised.value.problems


def test_bad_ids_are_unique():
    assert len({case[0] for case in BAD}) == len(BAD)


def test_every_nat_problem_is_reported_at_once():
    text = nat(source=["{name: out, to: wan, translate: masquerade}",
                       "{name: fixed, to: outside, translate: address}"],
               forwards=[WEB + ", to_ports: 70000}",
                         WEB.replace("web,", "web2,").replace("web-in", "no-telnet") + "}"])
    with pytest.raises(PolicyError) as raised:
        load_policy_text(text)
    assert [(p.code, p.path) for p in raised.value.problems] == [
        (Code.REFERENCE, "nat.source[0].to"),
        (Code.SCHEMA, "nat.source[1].address"),
        (Code.RANGE, "nat.forwards[0].to_ports"),
        (Code.CONTRADICTION, "nat.forwards[1].class"),
    ], raised.value.problems


def test_no_nat_section_is_no_nat():
    policy = load_policy_text(PRELUDE)
    assert policy.nat == Nat()
    assert "nat_" not in render(policy)
    assert load_policy_text(PRELUDE + "nat: {}\n").nat == Nat()
    assert load_policy_text(PRELUDE + "nat: {source: [], forwards: []}\n").nat == Nat()


def test_the_model_carries_what_the_yaml_says():
    policy = load_policy_text(nat(
        source=["{name: out, to: outside, source: [inside-nets], translate: masquerade, "
                "ports: '1024-65535', comment: the way out}",
                "{name: pool, to: outside, translate: address, "
                "address: ' 203.0.113.16 - 203.0.113.23 ', ports: 5000}"],
        forwards=[WEB + ", to_ports: 8443, hairpin: true, comment: web}",
                  "{name: range, from: outside, protocol: tcp, ports: ['8000-8009'], "
                  "to_address: 'FD00:3:0::5', to_ports: '9000-9009', class: web-in}",
                  "{name: same, from: outside, protocol: tcp, ports: ['9000-9009'], "
                  "to_address: 10.3.0.5, to_ports: '9000-9009', class: web-in}"]))
    assert policy.nat.source == (
        SourceNat(name="out", to_zone="outside", translate="masquerade",
                  source=("inside-nets",), ports=Interval(1024, 65535), comment="the way out"),
        SourceNat(name="pool", to_zone="outside", translate="address",
                  address="203.0.113.16-203.0.113.23", address_family="ipv4",
                  ports=Interval(5000, 5000)))
    web, shifted, same = policy.nat.forwards
    assert web == PortForward(name="web", from_zone="outside", protocol="tcp",
                              ports=(Interval(443, 443),), to_address="10.3.0.5",
                              family="ipv4", class_name="web-in", address="203.0.113.5",
                              to_ports=Interval(8443, 8443), hairpin=True, comment="web")
    assert web.translated_ports() == (Interval(8443, 8443),)
    assert (shifted.to_address, shifted.family, shifted.address) == ("fd00:3::5", "ipv6", "")
    assert shifted.translated_ports() == (Interval(9000, 9009),)
    assert same.to_ports is None, "a range onto itself keeps the ports"
    assert network_facts(policy) == (
        [("10.3.0.5", "web-in", "dmz"), ("fd00:3::5", "web-in", "dmz"),
         ("10.3.0.5", "web-in", "dmz")],
        [("outside", {4, 6}), None])


def test_a_shifted_range_maps_every_port_to_its_counterpart():
    policy = load_policy_text(forward("to_ports: '9000-9009'", base=WEB.replace(
        "[443]", "['8000-8009']")))
    rule = next(line for line in render(policy).splitlines() if "dport map" in line)
    elements = rule[rule.index("{ ") + 2:rule.index(" }")].split(", ")
    assert elements == [f"{8000 + n} : 10.3.0.5 . {9000 + n}" for n in range(10)]


def test_a_partial_shadow_is_allowed():
    """An earlier class that drops part of the forward's traffic (some sources) is a
    legitimate narrowing, not a closed forward."""
    text = forward().replace("  - {name: no-telnet,", "  - {name: block, source: [inside-nets], "
                                                      "action: drop}\n  - {name: no-telnet,")
    policy = load_policy_text(text)
    assert policy.nat.forwards[0].class_name == "web-in"


def test_an_earlier_class_to_another_zone_does_not_shadow():
    text = forward().replace("  - {name: no-telnet,", "  - {name: block, to: inside, "
                                                      "action: drop}\n  - {name: no-telnet,")
    assert load_policy_text(text).nat.forwards[0].class_name == "web-in"


def test_a_forward_to_a_hairpin_class_of_any_zone():
    policy = load_policy_text(forward("hairpin: true"))
    ruleset = render(policy)
    assert ruleset.count("meta mark set meta mark or 0x00000001 dnat ip to 10.3.0.5") == 2, \
        "one hairpin rule for each other zone (inside, dmz)"
    assert "iifname @zone_outside ip daddr 203.0.113.5 tcp dport 443 meta mark" not in ruleset


def test_a_notrack_class_keeps_an_explicit_forward_tracked():
    text = forward().replace("  - {name: inside-out,", "  - {name: raw, to: dmz, "
                                                       "destination: [other-server], "
                                                       "action: accept, notrack: true}\n"
                                                       "  - {name: inside-out,")
    raw = render(load_policy_text(text)).split("chain raw_prerouting {")[1].split("\t}")[0]
    lines = raw.strip().splitlines()
    assert lines[1].strip().startswith("fib daddr type local return")
    assert lines[2] == ('\t\tiifname @zone_outside ip daddr 203.0.113.5 tcp dport 443 return '
                        'comment "tusk: nat.forwards[0] web"')


def test_masquerade_ports_apply_to_tcp_and_udp_first():
    policy = load_policy_text(masquerade("ports: '1024-65535'"))
    post = render(policy).split("chain nat_postrouting {")[1].split("\t}")[0].splitlines()
    assert post[2:4] == [
        '\t\toifname @zone_outside meta l4proto { tcp, udp } masquerade to :1024-65535 '
        'comment "tusk: nat.source[0] out"',
        '\t\toifname @zone_outside masquerade comment "tusk: nat.source[0] out"']


# -- logging and the ct mark ---------------------------------------------------------------

def test_log_defaults():
    policy = load_policy_text(PRELUDE)
    assert (policy.settings.log_default_deny, policy.settings.log_rate) == (True, 50)
    assert not any(c.log for c in policy.classes)
    ruleset = render(policy)
    assert "\tlimit log_rate {\n\t\trate 50/second burst 100 packets\n\t}\n" in ruleset
    assert ('\t\tlimit name "log_rate" log group 1 prefix "tusk:drop:" comment '
            '"tusk: settings.log_default_deny"\n'
            '\t\tcounter name "default_deny" drop') in ruleset


def test_log_rule_precedes_the_verdict_in_its_own_rule():
    policy = load_policy_text(PRELUDE.replace("action: drop}", "action: drop, log: true}"))
    chain = render(policy).split("chain class_no-telnet {\n")[1].split("\t}")[0].splitlines()
    assert chain == [
        '\t\tlimit name "log_rate" log group 1 prefix "tusk:drop:no-telnet" '
        'comment "tusk: classes[1] no-telnet"',
        '\t\tcounter name "class_no-telnet" drop comment "tusk: classes[1] no-telnet"']


def test_log_prefix_and_group_are_the_contract():
    assert constants.LOG_GROUP == 1
    assert constants.LOG_PREFIX.format(verdict="accept", cls="web-in") == "tusk:accept:web-in"
    assert constants.LOG_PREFIX.format(verdict="drop", cls="") == "tusk:drop:"
    longest = constants.LOG_PREFIX.format(verdict="reject", cls="x" * names.NAME_MAX)
    assert len(longest) < 128, "NFLOG prefixes hold 127 characters"


def test_ct_mark_layout():
    assert names.CT_MARK_PROFILE_MASK | names.CT_MARK_FASTPATH_BIT | \
        names.CT_MARK_CLASS_MASK == 0xFFFFFFFF
    assert names.CT_MARK_CLASS_MASK == \
        (0xFFFFFFFF >> names.CT_MARK_CLASS_SHIFT) << names.CT_MARK_CLASS_SHIFT
    assert names.MAX_CLASSES == 32767
    policy = load_policy_text("classes:\n  - {name: a, action: accept, fastpath: true}\n"
                              "zones:\n  - {name: z, interfaces: [eth1]}\n")
    cls = policy.classes[0]
    assert class_mark(0, cls, 3) == 0x00030003
    last = class_mark(names.MAX_CLASSES - 1, cls, names.MAX_TCP_PROFILES)
    assert last == 0xFFFFFFFF
    assert last >> names.CT_MARK_CLASS_SHIFT == names.MAX_CLASSES


def test_one_class_too_many_is_refused():
    classes = [{"name": f"c{n}", "action": "drop"} for n in range(names.MAX_CLASSES + 1)]
    with pytest.raises(PolicyError) as raised:
        load_policy({"classes": classes})
    first = raised.value.problems[0]
    assert (first.code, first.path) == (Code.RANGE, "classes")
    assert first.message.startswith("32768 classes; at most 32767")


# -- the first class that takes a forward's traffic ----------------------------------------

# A catch-all rejects the rest from inside to outside; class to-server admits the server
# in any zone (no to) and comes after it: whether the catch-all closes the forward depends
# on the zone the server is in.
CATCH_ALL = """\
version: 1
zones:
  - {name: inside, interfaces: [eth1]}
  - {name: outside, interfaces: [eth2]}
  - {name: dmz, interfaces: [eth3]}
address_sets:
  - {name: server, entries: [198.51.100.7]}
services:
  - {name: https, protocol: tcp, ports: [443, 8443]}
classes:
  - {name: inside-rest, from: inside, to: outside, action: reject}
  - {name: to-server, destination: [server], services: [https], action: accept}
nat:
  forwards:
    - {name: web, from: inside, address: 192.0.2.1, protocol: tcp, ports: [443],
       to_address: 198.51.100.7, class: to-server}
"""


def test_a_class_to_one_zone_takes_a_forward_only_in_that_zone():
    policy = load_policy_text(CATCH_ALL)    # the engine alone cannot know the server's zone
    forward = policy.nat.forwards[0]
    taking = first_class_taking(policy, forward, "outside")
    assert (taking.position, taking.cls.name, taking.whole, taking.possibly) == \
        (0, "inside-rest", True, False)
    assert taking.reason() == (
        "classes[0] 'inside-rest' comes first and matches all of this forward's traffic that "
        "class 'to-server' matches, and rejects it")
    assert first_class_taking(policy, forward, "dmz") is None
    assert first_class_taking(policy, forward, "") is None, "a link in no zone"


def test_without_the_servers_zone_a_closing_class_to_one_zone_possibly_takes_it():
    policy = load_policy_text(CATCH_ALL)
    taking = first_class_taking(policy, policy.nat.forwards[0])
    assert (taking.position, taking.possibly) == (0, True)
    assert taking.reason() == (
        "classes[0] 'inside-rest' comes first and, if 198.51.100.7 is in zone outside, "
        "matches all of this forward's traffic that class 'to-server' matches, and rejects "
        "it: without a network configuration the server's zone is unknown, and class "
        "'to-server' admits traffic to any zone; give it the server's zone as its to, or "
        "move it before class 'inside-rest'")


@pytest.mark.parametrize("action, verb", [
    ("drop", "drops it"), ("accept, notrack: true", "accepts it untracked (notrack)")])
def test_dropping_and_untracking_classes_possibly_take_it_too(action, verb):
    policy = load_policy_text(CATCH_ALL.replace("action: reject}", f"action: {action}}}"))
    taking = first_class_taking(policy, policy.nat.forwards[0])
    assert taking.possibly and f"and {verb}: without a network configuration" in \
        taking.reason()


@pytest.mark.parametrize("change", [
    ("action: reject}", "action: accept}"),     # it would pass the traffic: the forward works
    ("action: accept}\nnat:", "action: accept, to: dmz}\nnat:"),   # the server is in dmz
    ("from: inside, to: outside", "from: dmz, to: outside"),        # other traffic
])
def test_without_the_servers_zone_what_cannot_close_the_forward_is_not_counted(change):
    policy = load_policy_text(CATCH_ALL.replace(*change))
    assert first_class_taking(policy, policy.nat.forwards[0]) is None


def test_the_engine_refuses_a_class_to_the_linked_class_zone_wherever_that_is():
    """The server must be in the zone the linked class sends to: a class to that zone
    takes the traffic first whatever the network says."""
    with pytest.raises(PolicyError) as raised:
        load_policy_text(CATCH_ALL.replace("action: accept}\nnat:",
                                           "action: accept, to: outside}\nnat:"))
    assert raised.value.path == "nat.forwards[0].class"
    assert raised.value.message.startswith("classes[0] 'inside-rest' comes first and matches "
                                           "all of this forward's traffic")


def test_a_class_that_takes_one_range_of_the_forwarded_ports_is_refused():
    """A forward of 443 and 8443 whose 443 an earlier class drops would stay closed on
    443: each range of the translated ports must reach the linked class first."""
    text = forward(base=WEB.replace("[443]", "[443, 8443]")).replace(
        "  - {name: no-telnet,", "  - {name: no-https, services: [https-only], action: drop}"
                                 "\n  - {name: no-telnet,").replace(
        "services:\n", "services:\n  - {name: https-only, protocol: tcp, ports: [443]}\n")
    with pytest.raises(PolicyError) as raised:
        load_policy_text(text)
    first = raised.value.problems[0]
    assert (first.path, first.message) == ("nat.forwards[0].class", (
        "classes[1] 'no-https' comes first and matches tcp 443 of this forward's traffic "
        "(which goes to tcp 443, 8443) that class 'web-in' matches, and drops it"))


@pytest.mark.parametrize("ports, taken", [
    (["1000-65535"], True),                 # holds the whole range, by its ends
    (["1024-65534"], False),                # all but its last port: a narrowing
    ([1024, "1025-65535"], True),           # merged, adjacent ranges hold it too
])
def test_a_range_is_taken_only_when_held_whole(ports, taken):
    text = CATCH_ALL.replace("ports: [443, 8443]}", "ports: ['1024-65535']}\n"
                             f"  - {{name: wide, protocol: tcp, ports: {ports}}}").replace(
        "{name: inside-rest, from: inside, to: outside,",
        "{name: inside-rest, from: inside, to: outside, services: [wide],").replace(
        "ports: [443],", "ports: ['1024-65535'],")
    policy = load_policy_text(text)
    taking = first_class_taking(policy, policy.nat.forwards[0], "outside")
    assert (taking is not None) == taken
    if taken:
        assert taking.ports == (Interval(1024, 65535),) and taking.whole
