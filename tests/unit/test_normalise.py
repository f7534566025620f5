"""Stage 1, normalise + validate: every bad input is a PolicyError with the right code,
the path of the offending field and a message an operator can act on. Plain Python."""
import os

import pytest

from lab.paths import ROOT
from policy.core import choices
from policy.core.errors import Code, PolicyError, Problem
from policy.core.model import AddressSet, Interval, Mss, Policy, Service, TcpOptions
from policy.core.normalise import load_policy, load_policy_file, load_policy_text

EXAMPLE = os.path.join(ROOT, "webui", "policy", "examples", "tusk.yaml")

# A valid policy with three classes; with_class() appends a fourth, classes[3].
PRELUDE = """\
version: 1
zones:
  - {name: inside, interfaces: [eth1]}
  - {name: outside, interfaces: [eth2]}
  - {name: dmz, interfaces: [eth3, eth3.10]}
address_sets:
  - {name: v4-hosts, entries: [10.0.0.1, 10.0.1.0/24]}
  - {name: v6-hosts, entries: ["2001:db8::1"]}
  - {name: dual, entries: [10.9.0.0/16, "2001:db8:9::/48"]}
  - {name: nothing, entries: []}
  - {name: also-nothing}
services:
  - {name: ssh, protocol: tcp, ports: [22]}
  - {name: dns, protocol: udp, ports: [53]}
  - {name: ping, protocol: icmp}
classes:
  - {name: c0, from: inside, to: outside, services: [ssh], action: accept}
  - {name: c1, from: inside, to: dmz, action: accept}
  - {name: c2, from: dmz, to: outside, source: [dual, v4-hosts], action: drop}
"""


def with_class(fields):
    """The prelude plus a fourth class (classes[3]) with these flow-mapping fields."""
    return PRELUDE + f"  - {{name: c3, {fields}}}\n"


def with_sections(zones=None, address_sets=None, services=None):
    """A small policy whose zones / address_sets / services lines are replaced."""
    return (
        "version: 1\n"
        "zones:\n" + (zones or "  - {name: inside, interfaces: [eth1]}\n") +
        "address_sets:\n" + (address_sets or "  - {name: hosts, entries: [10.0.0.1]}\n") +
        "services:\n" + (services or "  - {name: ssh, protocol: tcp, ports: [22]}\n"))


def entries(*values):
    return with_sections(address_sets="  - name: hosts\n    entries: [" +
                         ", ".join(f'"{v}"' for v in values) + "]\n")


def ports(protocol, *values):
    return with_sections(services=f"  - {{name: svc, protocol: {protocol}, ports: [" +
                         ", ".join(str(v) for v in values) + "]}\n")


# (id, yaml text, code, path, substring of the message) - the FIRST problem reported.
BAD = [
    # -- not YAML at all ---------------------------------------------------------------
    ("malformed-flow-list", "version: 1\nzones:\n  - {name: a, interfaces: [eth1}\n",
     Code.SYNTAX, "", "line 3"),
    ("malformed-unterminated", "version: 1\nsettings:\n  confirm_timeout: 10\nzones: [a, b\n",
     Code.SYNTAX, "", "not valid YAML at line"),
    ("malformed-tab-indent", "version: 1\n\tzones: []\n", Code.SYNTAX, "", "line 2, column 1"),
    ("malformed-bad-indent", "zones:\n- {name: a, interfaces: [e]}\n  bad: 1\n",
     Code.SYNTAX, "", "line 3"),
    ("python-tag-refused", "!!python/object/apply:os.system [true]\n", Code.SYNTAX, "",
     "the tag !!python/object/apply:os.system is not accepted"),
    ("duplicate-key-top", "version: 1\nzones: []\nversion: 1\n", Code.SYNTAX, "",
     "line 3, column 1: duplicate key 'version'"),
    ("duplicate-key-class", with_class("action: accept, action: drop"), Code.SYNTAX, "",
     "duplicate key 'action'"),
    ("duplicate-key-mss", with_class("action: accept, mss: {mode: fixed, value: 1400, value: 1300}"),
     Code.SYNTAX, "", "duplicate key 'value'"),
    # -- shape: not a mapping, unknown and missing keys, wrong types -------------------
    ("top-level-list", "- version: 1\n- zones: []\n", Code.SCHEMA, "",
     "must be a mapping, not a list"),
    ("top-level-text", "just some text\n", Code.SCHEMA, "", "must be a mapping, not text"),
    ("top-level-number", "42\n", Code.SCHEMA, "", "must be a mapping, not a number"),
    ("unknown-key-top", PRELUDE + "zone: []\n", Code.SCHEMA, "zone", "unknown key (allowed: "),
    ("unknown-key-settings", "settings: {confirm_timeout: 60, timeout: 5}\n", Code.SCHEMA,
     "settings.timeout", "unknown key (allowed: confirm_timeout, log_default_deny, log_rate)"),
    ("unknown-key-zone", with_sections(zones="  - {name: inside, interfaces: [eth1], vlan: 5}\n"),
     Code.SCHEMA, "zones[0].vlan", "unknown key"),
    ("unknown-key-class", with_class("action: accept, verdict: drop"), Code.SCHEMA,
     "classes[3].verdict", "unknown key (allowed: action, comment, destination, fastpath"),
    ("unknown-key-mss", with_class("action: accept, mss: {mode: fixed, value: 1400, size: 2}"),
     Code.SCHEMA, "classes[3].mss.size", "unknown key (allowed: mode, value)"),
    ("unknown-key-tcp-options", with_class("action: accept, tcp_options: {ecn: strip}"),
     Code.SCHEMA, "classes[3].tcp_options.ecn",
     "unknown key (allowed: sack_permitted, timestamps, window_scale)"),
    ("missing-action", with_class("from: inside"), Code.SCHEMA, "classes[3].action",
     "is required"),
    ("missing-interfaces", with_sections(zones="  - {name: inside}\n"), Code.SCHEMA,
     "zones[0].interfaces", "is required"),
    ("missing-protocol", with_sections(services="  - {name: ssh, ports: [22]}\n"),
     Code.SCHEMA, "services[0].protocol", "is required"),
    ("missing-mss-mode", with_class("action: accept, mss: {value: 1400}"), Code.SCHEMA,
     "classes[3].mss.mode", "is required"),
    ("missing-class-name", with_class("action: accept").replace("{name: c3, ", "{"),
     Code.SCHEMA, "classes[3].name", "is required"),
    ("wrong-type-zones", "zones: inside\n", Code.SCHEMA, "zones", "must be a list, not text"),
    ("wrong-type-classes", "classes: {name: a}\n", Code.SCHEMA, "classes",
     "must be a list, not a mapping"),
    ("wrong-type-interfaces", with_sections(zones="  - {name: inside, interfaces: eth1}\n"),
     Code.SCHEMA, "zones[0].interfaces", "must be a list, not text"),
    ("wrong-type-class-item", PRELUDE + "  - [c3, accept]\n", Code.SCHEMA, "classes[3]",
     "must be a mapping, not a list"),
    ("wrong-type-fastpath", with_class("action: accept, fastpath: 'yes please'"), Code.SCHEMA,
     "classes[3].fastpath", "'yes please' is not one of: auto, always, never"),
    ("wrong-type-fastpath-number", with_class("action: accept, fastpath: 1"), Code.SCHEMA,
     "classes[3].fastpath", "1 is not one of: auto, always, never"),
    ("fastpath-after-words", with_class("action: accept, fastpath_after: lots"), Code.SCHEMA,
     "classes[3].fastpath_after", "'lots' is not a size: a whole number of bytes, or one "
     "with a unit"),
    ("fastpath-after-unit", with_class("action: accept, fastpath_after: 3 mb"), Code.SCHEMA,
     "classes[3].fastpath_after", "'3 mb' is not a size"),
    ("fastpath-after-newline", with_class('action: accept, fastpath_after: "3\\nMB"'),
     Code.SCHEMA, "classes[3].fastpath_after", "is not a size"),
    ("fastpath-after-negative", with_class("action: accept, fastpath_after: -1"), Code.RANGE,
     "classes[3].fastpath_after", "-1 is below 0"),
    ("fastpath-after-huge", with_class("action: accept, fastpath_after: 2 TB"), Code.RANGE,
     "classes[3].fastpath_after", "2000000000000 is above 1000000000000"),
    ("fastpath-after-float", with_class("action: accept, fastpath_after: 1.5"), Code.SCHEMA,
     "classes[3].fastpath_after", "must be a whole number, not 1.5"),
    ("wrong-type-notrack", with_class("action: accept, notrack: 1"), Code.SCHEMA,
     "classes[3].notrack", "must be true or false, not 1"),
    ("wrong-type-mss", with_class("action: accept, mss: 1400"), Code.SCHEMA, "classes[3].mss",
     "must be a mapping, not a number"),
    ("wrong-type-mss-value", with_class("action: accept, mss: {mode: fixed, value: '1400'}"),
     Code.SCHEMA, "classes[3].mss.value", "must be a whole number, not '1400'"),
    ("wrong-type-mss-value-float", with_class("action: accept, mss: {mode: fixed, value: 1400.5}"),
     Code.SCHEMA, "classes[3].mss.value", "must be a whole number"),
    ("wrong-type-source-text", with_class("action: accept, source: v4-hosts"), Code.SCHEMA,
     "classes[3].source", "must be a list of address set names, e.g. [v4-hosts]"),
    ("wrong-type-from-list", with_class("action: accept, from: [inside]"), Code.SCHEMA,
     "classes[3].from", "must be the name of a zone"),
    ("wrong-type-confirm-timeout", "settings: {confirm_timeout: '60'}\n", Code.SCHEMA,
     "settings.confirm_timeout", "must be a whole number, not '60'"),
    ("wrong-choice-action", with_class("action: allow"), Code.SCHEMA, "classes[3].action",
     "'allow' is not one of: accept, drop, reject"),
    ("wrong-choice-mss-mode", with_class("action: accept, mss: {mode: clamp}"), Code.SCHEMA,
     "classes[3].mss.mode", "'clamp' is not one of: none, fixed, pmtu"),
    ("wrong-choice-option", with_class("action: accept, tcp_options: {timestamps: remove}"),
     Code.SCHEMA, "classes[3].tcp_options.timestamps", "'remove' is not one of: keep, strip"),
    ("wrong-choice-seqrand", with_class("action: accept, seqrand: responder"), Code.SCHEMA,
     "classes[3].seqrand", "'responder' is not one of: none, initiator, both"),
    ("wrong-choice-protocol", with_sections(services="  - {name: ping, protocol: icmp6}\n"),
     Code.SCHEMA, "services[0].protocol", "'icmp6' is not one of: tcp, udp"),
    ("bad-name-upper-case", with_sections(zones="  - {name: Inside, interfaces: [eth1]}\n"),
     Code.SCHEMA, "zones[0].name", "'Inside' is not a valid name"),
    ("bad-name-digit-first", with_class("action: accept").replace("name: c3", "name: 3c"),
     Code.SCHEMA, "classes[3].name", "'3c' is not a valid name"),
    ("bad-name-too-long", with_sections(services="  - {name: " + "s" * 33 + ", protocol: gre}\n"),
     Code.SCHEMA, "services[0].name", "is not a valid name: use 1-32"),
    ("bad-comment-quote", with_class("action: accept, comment: 'say \"hi\"'"), Code.SCHEMA,
     "classes[3].comment", "must not contain double quotes"),
    ("comment-too-long", with_class("action: accept, comment: " + "x" * 129), Code.RANGE,
     "classes[3].comment", "is 129 characters long, above 128"),
    # -- references --------------------------------------------------------------------
    ("unknown-zone-from", with_class("from: lan, action: accept"), Code.REFERENCE,
     "classes[3].from", "no zone is named 'lan'"),
    ("unknown-zone-to", with_class("from: inside, to: wan, action: accept"), Code.REFERENCE,
     "classes[3].to", "no zone is named 'wan'"),
    ("unknown-address-set", with_class("action: accept, destination: [v4-hosts, servers]"),
     Code.REFERENCE, "classes[3].destination[1]", "no address set is named 'servers'"),
    ("unknown-service", with_class("action: accept, services: [ssh, http]"), Code.REFERENCE,
     "classes[3].services[1]", "no service is named 'http'"),
    # -- duplicates --------------------------------------------------------------------
    ("duplicate-zone", with_sections(zones="  - {name: inside, interfaces: [eth1]}\n"
                                           "  - {name: inside, interfaces: [eth2]}\n"),
     Code.DUPLICATE, "zones[1].name", "'inside' is already defined at zones[0]"),
    ("duplicate-address-set", with_sections(address_sets="  - {name: hosts, entries: [10.0.0.1]}\n"
                                                         "  - {name: other, entries: []}\n"
                                                         "  - {name: hosts, entries: [10.0.0.2]}\n"),
     Code.DUPLICATE, "address_sets[2].name", "'hosts' is already defined at address_sets[0]"),
    ("duplicate-service", with_sections(services="  - {name: ssh, protocol: tcp, ports: [22]}\n"
                                                 "  - {name: ssh, protocol: tcp, ports: [2222]}\n"),
     Code.DUPLICATE, "services[1].name", "'ssh' is already defined at services[0]"),
    ("duplicate-class", with_class("action: accept").replace("name: c3", "name: c1"),
     Code.DUPLICATE, "classes[3].name", "'c1' is already defined at classes[1]"),
    ("interface-in-two-zones", with_sections(zones="  - {name: inside, interfaces: [eth1, eth2]}\n"
                                                   "  - {name: outside, interfaces: [eth3, eth1]}\n"),
     Code.DUPLICATE, "zones[1].interfaces[1]", "eth1 already belongs to zone 'inside'"),
    ("interface-twice-in-a-zone", with_sections(zones="  - {name: inside, interfaces: [eth1, eth1]}\n"),
     Code.DUPLICATE, "zones[0].interfaces[1]", "eth1 already belongs to zone 'inside'"),
    ("duplicate-entry", entries("10.0.0.1", "10.0.0.2", "10.0.0.1"), Code.DUPLICATE,
     "address_sets[0].entries[2]", "10.0.0.1 is already listed at address_sets[0].entries[0]"),
    ("duplicate-entry-canonical", entries("2001:db8::1", "2001:DB8:0::1"), Code.DUPLICATE,
     "address_sets[0].entries[1]", "2001:db8::1 is already listed"),
    ("service-listed-twice", with_class("action: accept, services: [ssh, dns, ssh]"),
     Code.DUPLICATE, "classes[3].services[2]", "'ssh' is listed twice"),
    # -- interface names ---------------------------------------------------------------
    ("interface-with-space", with_sections(zones="  - {name: inside, interfaces: ['eth 1']}\n"),
     Code.SCHEMA, "zones[0].interfaces[0]", "'eth 1' is not a valid interface name"),
    ("interface-too-long", with_sections(zones="  - {name: inside, interfaces: [abcdefghijklmnop]}\n"),
     Code.SCHEMA, "zones[0].interfaces[0]", "is not a valid interface name (1-15 characters"),
    ("interface-slash", with_sections(zones="  - {name: inside, interfaces: [eth1, 'eth/2']}\n"),
     Code.SCHEMA, "zones[0].interfaces[1]", "'eth/2' is not a valid interface name"),
    ("interface-number", with_sections(zones="  - {name: inside, interfaces: [0]}\n"),
     Code.SCHEMA, "zones[0].interfaces[0]", "0 is not a valid interface name"),
    ("interface-empty-text", with_sections(zones="  - {name: inside, interfaces: ['']}\n"),
     Code.SCHEMA, "zones[0].interfaces[0]", "'' is not a valid interface name"),
    ("zone-without-interfaces", with_sections(zones="  - {name: inside, interfaces: []}\n"),
     Code.SCHEMA, "zones[0].interfaces", "must name at least one interface"),
    # -- MSS ---------------------------------------------------------------------------
    ("mss-above-65535", with_class("action: accept, mss: {mode: fixed, value: 70000}"),
     Code.RANGE, "classes[3].mss.value", "70000 is above 65535"),
    ("mss-below-536", with_class("action: accept, mss: {mode: fixed, value: 535}"),
     Code.RANGE, "classes[3].mss.value", "535 is below 536"),
    ("mss-zero", with_class("action: accept, mss: {mode: fixed, value: 0}"), Code.RANGE,
     "classes[3].mss.value", "0 is below 536"),
    ("mss-fixed-without-value", with_class("action: accept, mss: {mode: fixed}"), Code.SCHEMA,
     "classes[3].mss.value", "is required when mode is fixed"),
    ("mss-value-with-pmtu", with_class("action: accept, mss: {mode: pmtu, value: 1400}"),
     Code.CONTRADICTION, "classes[3].mss.value", "only a fixed clamp takes a value (mode is pmtu)"),
    ("mss-value-with-none", with_class("action: accept, mss: {mode: none, value: 1400}"),
     Code.CONTRADICTION, "classes[3].mss.value", "(mode is none)"),
    # -- addresses ---------------------------------------------------------------------
    ("prefix-host-bits-v4", entries("10.0.0.1/24"), Code.ADDRESS, "address_sets[0].entries[0]",
     "'10.0.0.1/24' has host bits set; the prefix is 10.0.0.0/24"),
    ("prefix-host-bits-v4-odd", entries("10.0.0.0/8", "192.168.1.130/25"), Code.ADDRESS,
     "address_sets[0].entries[1]", "the prefix is 192.168.1.128/25"),
    ("prefix-host-bits-v6", entries("2001:db8:0:1::1/56"), Code.ADDRESS,
     "address_sets[0].entries[0]", "the prefix is 2001:db8::/56"),
    ("prefix-too-long", entries("10.0.0.0/33"), Code.ADDRESS, "address_sets[0].entries[0]",
     "'10.0.0.0/33' is not a valid prefix"),
    ("prefix-garbage", entries("10.0.0.0/abc"), Code.ADDRESS, "address_sets[0].entries[0]",
     "is not a valid prefix"),
    ("address-octet-too-big", entries("10.0.0.256"), Code.ADDRESS, "address_sets[0].entries[0]",
     "'10.0.0.256' is not a valid IPv4 or IPv6 address"),
    ("address-hostname", entries("backup.example.com"), Code.ADDRESS,
     "address_sets[0].entries[0]", "is not a valid IPv4 or IPv6 address"),
    ("address-bad-v6", entries("2001:db8:::1"), Code.ADDRESS, "address_sets[0].entries[0]",
     "is not a valid IPv4 or IPv6 address"),
    ("address-not-text", with_sections(address_sets="  - {name: hosts, entries: [10]}\n"),
     Code.ADDRESS, "address_sets[0].entries[0]", "10 is not text"),
    ("range-reversed", entries("10.0.0.9-10.0.0.1"), Code.ADDRESS, "address_sets[0].entries[0]",
     "'10.0.0.9-10.0.0.1' starts after it ends"),
    ("range-reversed-v6", entries("2001:db8::ff-2001:db8::1"), Code.ADDRESS,
     "address_sets[0].entries[0]", "starts after it ends"),
    ("range-mixed-families", entries("10.0.0.1-2001:db8::1"), Code.ADDRESS,
     "address_sets[0].entries[0]", "'10.0.0.1-2001:db8::1' mixes IPv4 and IPv6"),
    ("range-garbage", entries("10.0.0.1-ten"), Code.ADDRESS, "address_sets[0].entries[0]",
     "is not a valid address range"),
    # -- ports -------------------------------------------------------------------------
    ("port-zero", ports("tcp", 0), Code.RANGE, "services[0].ports[0]", "0 is below 1"),
    ("port-above-65535", ports("udp", 80, 65536), Code.RANGE, "services[0].ports[1]",
     "65536 is above 65535"),
    ("port-range-above", ports("tcp", '"1000-70000"'), Code.RANGE, "services[0].ports[0]",
     "70000 is above 65535"),
    ("port-text-above", ports("sctp", '"99999"'), Code.RANGE, "services[0].ports[0]",
     "99999 is above 65535"),
    ("port-range-reversed", ports("tcp", '"2000-1000"'), Code.SCHEMA, "services[0].ports[0]",
     "'2000-1000' starts after it ends"),
    ("port-non-numeric", ports("tcp", "ssh"), Code.SCHEMA, "services[0].ports[0]",
     "'ssh' is not a port or a port range (a-b)"),
    ("port-non-numeric-range", ports("udp", '"10-x"'), Code.SCHEMA, "services[0].ports[0]",
     "is not a port or a port range"),
    ("port-float", ports("tcp", 22.5), Code.SCHEMA, "services[0].ports[0]", "is not a port"),
    ("port-boolean", ports("tcp", "true"), Code.SCHEMA, "services[0].ports[0]",
     "True is not a port"),
    ("port-text-below", ports("tcp", "below"), Code.SCHEMA, "services[0].ports[0]",
     "'below' is not a port"),
    ("ports-on-icmp", ports("icmp", 8), Code.CONTRADICTION, "services[0].ports",
     "icmp has no ports"),
    ("ports-on-icmpv6", ports("icmpv6", 128), Code.CONTRADICTION, "services[0].ports",
     "icmpv6 has no ports"),
    ("ports-on-gre", ports("gre", 1), Code.CONTRADICTION, "services[0].ports", "gre has no ports"),
    # -- contradictions (docs/POLICY.md) ----------------------------------------------
    ("drop-with-mss", with_class("action: drop, mss: {mode: pmtu}"), Code.CONTRADICTION,
     "classes[3].mss", "only accepted traffic can be modified; the action is drop"),
    ("reject-with-strip", with_class("action: reject, tcp_options: {sack_permitted: strip}"),
     Code.CONTRADICTION, "classes[3].tcp_options",
     "only accepted traffic can be modified; the action is reject"),
    ("drop-with-seqrand", with_class("action: drop, seqrand: initiator"), Code.CONTRADICTION,
     "classes[3].seqrand", "the action is drop"),
    ("reject-with-fastpath", with_class("action: reject, fastpath: true"), Code.CONTRADICTION,
     "classes[3].fastpath", "the action is reject"),
    ("seqrand-with-notrack", with_class("action: accept, seqrand: both, notrack: true"),
     Code.CONTRADICTION, "classes[3].seqrand", "needs connection tracking, which notrack turns off"),
    ("fastpath-with-notrack", with_class("action: accept, fastpath: true, notrack: true"),
     Code.CONTRADICTION, "classes[3].fastpath", "needs connection tracking, which notrack turns off"),
    ("auto-with-drop", with_class("action: drop, fastpath: auto"), Code.CONTRADICTION,
     "classes[3].fastpath", "the action is drop"),
    ("auto-with-notrack", with_class("action: accept, fastpath: auto, notrack: true"),
     Code.CONTRADICTION, "classes[3].fastpath", "notrack turns off"),
    ("auto-without-tcp", with_class("action: accept, services: [dns], fastpath: auto"),
     Code.CONTRADICTION, "classes[3].fastpath", "the class matches no TCP traffic"),
    ("after-with-always", with_class("action: accept, fastpath: always, fastpath_after: 5 MB"),
     Code.CONTRADICTION, "classes[3].fastpath_after", "only a class whose fast path is auto "
     "promotes after a number of bytes (this one's is always)"),
    ("after-of-a-drop-class", with_class("action: drop, fastpath_after: 5 MB"),
     Code.CONTRADICTION, "classes[3].fastpath_after", "(this one's is never)"),
    ("after-without-tcp", with_class("action: accept, services: [dns], fastpath_after: 5"),
     Code.CONTRADICTION, "classes[3].fastpath_after", "(this one's is never)"),
    ("hardware-with-never", with_class("action: accept, fastpath: never, hardware: true"),
     Code.CONTRADICTION, "classes[3].hardware", "hardware carries fast-path connections, and "
     "this class's fast path is never"),
    ("hardware-of-a-drop-class", with_class("action: drop, hardware: true"),
     Code.CONTRADICTION, "classes[3].hardware", "this class's fast path is never"),
    ("hardware-with-seqrand", with_class("action: accept, seqrand: both, hardware: true"),
     Code.CONTRADICTION, "classes[3].hardware", "no NIC rewrites the sequence numbers and "
     "SACK blocks seqrand shifts"),
    ("hardware-not-boolean", with_class("action: accept, hardware: yes please"),
     Code.SCHEMA, "classes[3].hardware", "must be true or false, not 'yes please'"),
    ("auto-without-zones", "classes:\n  - {name: all, action: accept, fastpath: auto}\n",
     Code.CONTRADICTION, "classes[0].fastpath", "the policy has no zones"),
    ("mss-without-tcp", with_class("action: accept, services: [dns], mss: {mode: fixed, value: 1400}"),
     Code.CONTRADICTION, "classes[3].mss", "the class matches no TCP traffic (services: dns)"),
    ("strip-without-tcp", with_class("action: accept, services: [dns, ping], "
                                     "tcp_options: {timestamps: strip}"),
     Code.CONTRADICTION, "classes[3].tcp_options", "matches no TCP traffic (services: dns, ping)"),
    ("seqrand-without-tcp", with_class("action: accept, services: [ping], seqrand: both"),
     Code.CONTRADICTION, "classes[3].seqrand", "matches no TCP traffic"),
    ("v4-source-v6-destination", with_class("action: accept, source: [v4-hosts], "
                                            "destination: [v6-hosts]"),
     Code.CONTRADICTION, "classes[3].destination",
     "the source has only IPv4 addresses and the destination only IPv6: no packet can match both"),
    ("v6-source-v4-destination", with_class("action: accept, source: [v6-hosts], "
                                            "destination: [v4-hosts]"),
     Code.CONTRADICTION, "classes[3].destination",
     "the source has only IPv6 addresses and the destination only IPv4"),
    ("shadowed-identical", with_class("from: inside, to: outside, services: [ssh], action: drop"),
     Code.CONTRADICTION, "classes[3]", "never matches: classes[0] 'c0' matches the same traffic first"),
    ("shadowed-same-sets-other-order", with_class("from: dmz, to: outside, "
                                                  "source: [v4-hosts, dual], action: accept"),
     Code.CONTRADICTION, "classes[3]", "never matches: classes[2] 'c2'"),
    ("only-empty-source", with_class("action: accept, source: [nothing]"), Code.CONTRADICTION,
     "classes[3].source", "nothing is empty, so the class can never match"),
    ("only-empty-destination", with_class("action: accept, source: [dual], "
                                          "destination: [nothing, also-nothing]"),
     Code.CONTRADICTION, "classes[3].destination", "nothing, also-nothing are empty"),
    # -- settings and version ----------------------------------------------------------
    ("confirm-timeout-below", "settings: {confirm_timeout: 5}\n", Code.RANGE,
     "settings.confirm_timeout", "5 is below 10"),
    ("confirm-timeout-above", "settings: {confirm_timeout: 3601}\n", Code.RANGE,
     "settings.confirm_timeout", "3601 is above 3600"),
    ("settings-not-mapping", "settings: [confirm_timeout]\n", Code.SCHEMA, "settings",
     "must be a mapping, not a list"),
    ("version-2", PRELUDE.replace("version: 1", "version: 2"), Code.SCHEMA, "version",
     "2 is not supported (this Tusk reads version 1)"),
    ("version-text", "version: 'one'\n", Code.SCHEMA, "version", "'one' is not supported"),
    ("version-text-1", "version: '1'\n", Code.SCHEMA, "version", "'1' is not supported"),
    ("version-true", "version: true\n", Code.SCHEMA, "version", "is not supported"),
    ("version-float", "version: 1.5\n", Code.SCHEMA, "version", "1.5 is not supported"),
    ("version-1.0", "version: 1.0\n", Code.SCHEMA, "version", "is not supported"),
]


@pytest.mark.parametrize("text, code, path, message", [case[1:] for case in BAD],
                         ids=[case[0] for case in BAD])
def test_bad_policy(text, code, path, message):
    with pytest.raises(PolicyError) as raised:
        load_policy_text(text)
    error = raised.value
    first = error.problems[0]
    assert (first.code, first.path) == (code, path), error.problems
    assert message in first.message, error.problems
    assert (error.code, error.path, error.message) == (first.code, first.path, first.message)
    assert all(isinstance(p, Problem) for p in error.problems)
    assert str(error).splitlines()[0] == f"error[{code.name}]: {first}"


def test_bad_ids_are_unique():
    ids = [case[0] for case in BAD]
    assert len(ids) == len(set(ids))


def test_mss_out_of_range_in_the_fourth_class_is_exactly_reported():
    with pytest.raises(PolicyError) as raised:
        load_policy_text(with_class("action: accept, mss: {mode: fixed, value: 70000}"))
    assert raised.value.problems == [Problem(Code.RANGE, "classes[3].mss.value",
                                             "70000 is above 65535")]
    assert str(raised.value) == "error[RANGE]: classes[3].mss.value: 70000 is above 65535"
    assert int(raised.value.code) == 14


@pytest.mark.parametrize("text", [
    "? [a, b]\n: 1\n",                      # a block mapping with a sequence as key
    "version: 1\n{[zones]: 1}: 2\n",        # a flow mapping as key
    "zones:\n  - {name: a, interfaces: [eth1], {x: 1}: 2}\n",
], ids=["sequence-key", "mapping-key", "mapping-key-nested"])
def test_unhashable_yaml_key_is_a_policy_error(text):
    """YAML allows lists and mappings as keys; they must not crash the loader."""
    with pytest.raises(PolicyError) as raised:
        load_policy_text(text)
    assert raised.value.code in (Code.SYNTAX, Code.SCHEMA)


def test_yaml_errors_carry_line_and_column():
    with pytest.raises(PolicyError) as raised:
        load_policy_text("version: 1\nzones:\n  - name: a\n    interfaces: [eth1\nclasses: []\n")
    assert raised.value.code == Code.SYNTAX
    assert raised.value.path == ""
    assert raised.value.message.startswith("not valid YAML at line ")
    line = int(raised.value.message.split("line ")[1].split(",")[0])
    assert 4 <= line <= 5, raised.value.message


def test_duplicate_key_names_the_line_of_the_second_key():
    text = PRELUDE + "  - name: c3\n    action: accept\n    notrack: true\n    notrack: false\n"
    with pytest.raises(PolicyError) as raised:
        load_policy_text(text)
    second = len(text.splitlines())
    assert raised.value.problems == [Problem(
        Code.SYNTAX, "", f"not valid YAML at line {second}, column 5: duplicate key 'notrack'")]


def test_every_problem_is_reported_at_once():
    text = """\
version: 3
settings: {confirm_timeout: 1}
zones:
  - {name: inside, interfaces: [eth1]}
  - {name: outside, interfaces: [eth1]}
address_sets:
  - {name: hosts, entries: [10.0.0.1/8, 10.0.0.300]}
services:
  - {name: web, protocol: tcp, ports: [80, 0]}
  - {name: ping, protocol: icmp, ports: [8]}
classes:
  - {name: a, from: lan, action: accept}
  - {name: b, action: drop, mss: {mode: pmtu}}
  - {name: c, action: accept, mss: {mode: fixed, value: 70000}, services: [nope]}
"""
    with pytest.raises(PolicyError) as raised:
        load_policy_text(text)
    found = [(p.code, p.path) for p in raised.value.problems]
    assert found == [
        (Code.SCHEMA, "version"),
        (Code.RANGE, "settings.confirm_timeout"),
        (Code.DUPLICATE, "zones[1].interfaces[0]"),
        (Code.ADDRESS, "address_sets[0].entries[0]"),
        (Code.ADDRESS, "address_sets[0].entries[1]"),
        (Code.RANGE, "services[0].ports[1]"),
        (Code.CONTRADICTION, "services[1].ports"),
        (Code.REFERENCE, "classes[0].from"),
        (Code.CONTRADICTION, "classes[1].mss"),
        (Code.REFERENCE, "classes[2].services[0]"),
        (Code.RANGE, "classes[2].mss.value"),
    ], raised.value.problems
    assert raised.value.code == Code.SCHEMA
    assert len(str(raised.value).splitlines()) == len(found)


def test_problems_in_a_class_do_not_hide_problems_in_later_classes():
    text = PRELUDE + ("  - {name: c3, action: accept, mss: {mode: fixed, value: 70000}}\n"
                      "  - {name: c4, action: drop, seqrand: both}\n"
                      "  - {name: c5, action: accept, from: nowhere}\n")
    with pytest.raises(PolicyError) as raised:
        load_policy_text(text)
    assert [(p.code, p.path) for p in raised.value.problems] == [
        (Code.RANGE, "classes[3].mss.value"),
        (Code.CONTRADICTION, "classes[4].seqrand"),
        (Code.REFERENCE, "classes[5].from"),
    ]


def test_missing_file_is_an_io_error(tmp_path):
    with pytest.raises(PolicyError) as raised:
        load_policy_file(tmp_path / "absent.yaml")
    assert raised.value.code == Code.IO
    assert "cannot read" in raised.value.message and "absent.yaml" in raised.value.message


def test_file_that_is_not_utf8_is_a_syntax_error(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("zones:\n  - {name: caf\xe9, interfaces: [eth1]}\n".encode("latin-1"))
    with pytest.raises(PolicyError) as raised:
        load_policy_file(path)
    assert raised.value.code == Code.SYNTAX
    assert "not UTF-8" in raised.value.message


# -- valid policies ----------------------------------------------------------------------

def test_valid_policy_returns_a_policy():
    policy = load_policy_text(PRELUDE)
    assert isinstance(policy, Policy)
    assert [c.name for c in policy.classes] == ["c0", "c1", "c2"]
    assert [z.name for z in policy.zones] == ["inside", "outside", "dmz"]
    assert policy.zone["dmz"].interfaces == ("eth3", "eth3.10")
    assert policy.classes[2].source == ("dual", "v4-hosts")
    assert policy.classes[2].action == "drop"


def test_shipped_example_is_valid():
    policy = load_policy_file(EXAMPLE)
    assert isinstance(policy, Policy)
    assert [c.name for c in policy.classes] == ["bulk-copy", "admin", "diagnostics",
                                                "inside-rest"]
    assert policy.classes[1].mss == Mss(choices.MSS_PMTU)
    assert policy.settings.confirm_timeout == 120


@pytest.mark.parametrize("text", ["", "# only a comment\n", "{}\n", "version: 1\n"])
def test_empty_documents_are_the_empty_policy(text):
    assert load_policy_text(text) == Policy()


def test_defaults_of_a_class():
    cls = load_policy_text("classes:\n  - {name: all, action: accept}\n").classes[0]
    assert (cls.from_zone, cls.to_zone, cls.source, cls.destination, cls.services) == (
        None, None, (), (), ())
    assert cls.mss == Mss(choices.MSS_NONE, None)
    assert cls.tcp_options == TcpOptions("keep", "keep", "keep")
    # no zones: no flowtable to promote to
    assert (cls.seqrand, cls.fastpath, cls.notrack, cls.comment) == ("none", "never", False, "")
    assert cls.tcp_profile() is None


@pytest.mark.parametrize("fields, mode, after", [
    ("action: accept", "auto", 1_000_000),                  # any traffic: TCP among it
    ("action: accept, services: [ssh, dns]", "auto", 1_000_000),
    ("action: accept, fastpath_after: 0", "auto", 0),
    ("action: accept, fastpath_after: 2 MB", "auto", 2_000_000),
    ("action: accept, fastpath_after: 512KiB", "auto", 524_288),
    ("action: accept, fastpath_after: ' 1 GiB '", "auto", 1 << 30),
    ("action: accept, fastpath: auto, fastpath_after: 1000000000000", "auto", 10 ** 12),
    ("action: accept, fastpath: true", "always", 1_000_000),     # as policies before auto
    ("action: accept, fastpath: false", "never", 1_000_000),
    ("action: accept, fastpath: never", "never", 1_000_000),
    ("action: accept, services: [dns]", "never", 1_000_000),    # no TCP: nothing to promote
    ("action: accept, services: [dns], fastpath: always", "always", 1_000_000),
    ("action: accept, notrack: true", "never", 1_000_000),
    ("action: drop", "never", 1_000_000),
    ("action: reject, fastpath: never", "never", 1_000_000),
])
def test_the_fast_path_of_a_class_is_auto_where_it_can_be(fields, mode, after):
    cls = load_policy_text(with_class(fields)).classes[3]
    assert (cls.fastpath, cls.fastpath_after) == (mode, after)


def test_a_class_may_randomise_on_the_fast_path():
    # the kernel's flowtable translates seqadj connections (kernel-patches/0015); whether
    # the target's kernel does is a capability, checked at apply time
    cls = load_policy_text(with_class("action: accept, seqrand: both, fastpath: true")).classes[3]
    assert (cls.seqrand, cls.fastpath) == ("both", "always")


def test_load_policy_takes_plain_data_as_the_web_ui_sends_it():
    policy = load_policy({"zones": [{"name": "lan", "interfaces": ["eth1"]}],
                          "classes": [{"name": "out", "from": "lan", "action": "accept",
                                       "mss": {"mode": "fixed", "value": 1400}}]})
    assert policy.classes[0].mss == Mss("fixed", 1400)
    with pytest.raises(PolicyError) as raised:
        load_policy({"classes": [{"name": "out", "action": "accept",
                                  "mss": {"mode": "fixed", "value": 70000}}]})
    assert raised.value.problems == [Problem(Code.RANGE, "classes[0].mss.value",
                                             "70000 is above 65535")]


def test_address_intervals_are_merged_per_family():
    aset = load_policy_text(entries(
        "10.0.0.0/25", "10.0.0.128/25", "10.0.0.77", "10.0.1.0-10.0.1.255",
        "10.9.0.1-10.9.0.10", "10.9.0.5-10.9.0.20", "10.9.0.21",
        "2001:db8::/64", "2001:db8:0:1::/64", "2001:db8::5", "2001:db8:9::1")).address_sets[0]
    assert aset.ipv4 == (Interval(0x0A000000, 0x0A0001FF), Interval(0x0A090001, 0x0A090015))
    v6 = 0x20010DB8 << 96
    assert aset.ipv6 == (Interval(v6, v6 + (1 << 65) - 1),
                         Interval(v6 + (9 << 80) + 1, v6 + (9 << 80) + 1))
    assert aset.families == frozenset({"ipv4", "ipv6"})


def test_entries_keep_the_operators_order_in_canonical_text():
    aset = load_policy_text(entries(
        " 10.1.0.0/16 ", "2001:DB8:0:0::1", "2001:db8::0001-2001:db8::00ff", "192.0.2.1",
        "10.2.0.1 - 10.2.0.9", "2001:0db8:0:0:0:0:0:0/32")).address_sets[0]
    assert aset.entries == ("10.1.0.0/16", "2001:db8::1", "2001:db8::1-2001:db8::ff",
                            "192.0.2.1", "10.2.0.1-10.2.0.9", "2001:db8::/32")


def test_empty_address_set_has_no_family():
    policy = load_policy_text(PRELUDE)
    assert policy.address_set["nothing"] == AddressSet(name="nothing", entries=())
    assert policy.address_set["also-nothing"].families == frozenset()
    assert policy.address_set["dual"].families == frozenset({"ipv4", "ipv6"})


def test_ports_are_merged_intervals():
    policy = load_policy_text(with_sections(services=(
        "  - {name: web, protocol: tcp, ports: [443, 80, '81', '8000-8010', '8005-8020', 8021]}\n"
        "  - {name: any, protocol: udp}\n"
        "  - {name: ping, protocol: icmp, ports: []}\n")))
    assert policy.service["web"] == Service("web", "tcp", (
        Interval(80, 81), Interval(443, 443), Interval(8000, 8021)))
    assert policy.service["any"].ports == ()
    assert policy.service["ping"] == Service("ping", "icmp", ())


def test_tcp_options_stripped_in_fixed_order():
    cls = load_policy_text(with_class(
        "action: accept, tcp_options: {timestamps: strip, window_scale: strip, "
        "sack_permitted: strip}")).classes[3]
    assert cls.tcp_options.stripped() == ("window", "sack-perm", "timestamp")
    assert cls.tcp_profile() == (Mss(), ("window", "sack-perm", "timestamp"))


def test_a_partly_empty_source_is_allowed():
    """Only a side that is entirely empty sets is refused."""
    cls = load_policy_text(with_class("action: accept, source: [nothing, v4-hosts]")).classes[3]
    assert cls.source == ("nothing", "v4-hosts")


def test_dual_stack_side_against_single_family_is_allowed():
    policy = load_policy_text(with_class("action: accept, source: [dual], "
                                         "destination: [v6-hosts]"))
    assert policy.classes[3].destination == ("v6-hosts",)


def test_same_match_with_different_services_is_not_shadowed():
    policy = load_policy_text(with_class("from: inside, to: outside, services: [ssh, dns], "
                                         "action: drop"))
    assert policy.classes[3].services == ("ssh", "dns")
