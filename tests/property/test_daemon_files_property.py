"""Whatever an admin types or a forged row holds, a daemon's file holds exactly what was
meant (docs/SECURITY.md: typed values, one quoting point per format, round-trip tested).

For each renderer of a file a root daemon reads - rsyslog.conf (logs), networkd's
.network/.netdev files and the resolved/timesyncd drop-ins, /etc/hostname and
/etc/timezone (network), keepalived.conf and conntrackd.conf (HA), the host table (nft),
and the TOML Tusk writes for itself - documents are drawn whose values are valid, valid
with something appended or prepended, or nothing but trouble: newlines, quotes,
backslashes, %, #, ;, braces, NUL, Unicode line and paragraph separators, octal and
percent escapes, over-long text. Each goes through the check the form and the agent run
(settings.check, network's from_document, ha's from_document). Whatever passes is
rendered, and the file is read back - by the daemon's own checker where it has one
(`rsyslogd -N1`, `keepalived --config-test` on the interfaces it names, conntrackd's
parser, `nft -c`) and by a reader of the format's own rules (daemon_parsers.py) - and
must hold exactly the intended sections, keys and directives, with the values' canonical
text, and nothing else."""
import ipaddress
import json
import os
import re
import subprocess
import tempfile
import tomllib

import pytest
from daemon_parsers import blocks, frr_commands, rainerscript, snmpd_conf, systemd_ini
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from ha.core import config as ha_config
from ha.core import render as ha_render
from logs.core import forwarder
from logs.core import settings as log_settings
from network.core import bpdu, frr, networkd
from network.core import normalise as network_normalise
from network.core.errors import NetworkError
from policy.core import render_boot
from tusklib import values
from tusklib.formats import FormatRefused
from tusklib.tomlwrite import toml_value

NASTY_PIECES = ["\n", "\r", "\r\n", '"', "'", "\\", "%", "#", ";", "{", "}", "\x00",
                "\u2028", "\u2029", "\x85", "$", "`", "[", "]", "=", " ", "\t", "!", "@",
                "(", ")", "\\057", "\\n", "%2F", "%0a", "\x7f", "/", ":", "..", "\u00b2",
                "\u0663", "*", "&", "|", "<", ">"]
NASTY = st.lists(st.one_of(st.sampled_from(NASTY_PIECES), st.text(max_size=2)), min_size=1,
                 max_size=6).map("".join)
LONG = st.text(alphabet="ab1.:-", min_size=254, max_size=600)
# the payloads of issue 34, as a whole and as suffixes
PAYLOADS = ['%"port="1")}\nmodule(load="omprog")\n', '%\n[Resolve]\nDNSStubListenerExtra=0.0.0.0',
            '"\nmodule(load="omprog")', "\n}\nvrrp_script x {\n script \"/bin/sh\"\n}",
            "\n\tPath /tmp/x", '" ; flush ruleset ; "']


def poisoned(valid):
    """valid values, mostly; then valid ones with trouble before or after, trouble
    alone, over-long text and the issue's payloads."""
    return st.one_of(valid, valid, valid, valid, valid, valid,
                     st.tuples(valid, st.one_of(NASTY, st.sampled_from(PAYLOADS))).map(
                         lambda t: t[0] + t[1]),
                     st.tuples(NASTY, valid).map(lambda t: t[0] + t[1]),
                     NASTY, LONG)


IPV4 = st.ip_addresses(v=4).map(str)
IPV6 = st.ip_addresses(v=6).map(str)
IFNAMES = st.from_regex(r"[A-Za-z0-9_.@+-]{1,15}", fullmatch=True)
SCOPED = st.tuples(IPV6, IFNAMES).map(lambda t: f"{t[0]}%{t[1]}")
LABEL = r"[a-z0-9](?:[a-z0-9-]{0,6}[a-z0-9])?"
HOSTNAMES = st.from_regex(rf"{LABEL}(?:\.{LABEL}){{0,3}}(?:\.[a-z]{{2,6}})", fullmatch=True)
EXAMPLES = settings(max_examples=int(os.environ.get("TUSK_PROPERTY_EXAMPLES", "250")),
                    deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                          HealthCheck.filter_too_much])
SCRATCH = tempfile.mkdtemp(prefix="tusk-daemon-files-")


def canonical_ip(text):
    return str(ipaddress.ip_address(text))


def canonical_cidr(text):
    return str(ipaddress.ip_interface(text))


# -- rsyslog (logs/core/forwarder.py) ---------------------------------------------------------

@st.composite
def receivers(draw):
    """One to three receivers, up to two of whose values are poisoned."""
    count = draw(st.integers(1, 3))   # none: no file (logs/agent_jobs.py)
    bad = draw(st.sets(st.tuples(st.integers(0, count - 1),
                                 st.sampled_from(["host", "port", "transport"])), max_size=2))
    valid = {"host": st.one_of(IPV4, IPV6, HOSTNAMES), "port": st.integers(1, 65535),
             "transport": st.sampled_from(["udp", "tcp"])}
    trouble = {"host": poisoned(st.one_of(IPV4, IPV6, SCOPED, HOSTNAMES)),
               "port": st.one_of(st.integers(-2, 70000), poisoned(st.just("514"))),
               "transport": poisoned(st.just("tcp"))}
    return [{field: draw(trouble[field] if (number, field) in bad else valid[field])
             for field in valid} for number in range(count)]


TEMPLATE = [("constant", {"value": "<"}, None), ("property", {"name": "pri"}, None),
            ("constant", {"value": ">1 "}, None),
            ("property", {"name": "timereported", "dateFormat": "rfc3339"}, None),
            ("constant", {"value": " "}, None), ("property", {"name": "hostname"}, None),
            ("constant", {"value": " tusk - firewall - "}, None),
            ("property", {"name": "msg"}, None)]


def intended_rsyslog(targets, log_dir, work_dir):
    """What rsyslog must read: the fixed objects, and one omfwd action per receiver with
    the host's canonical text (an address as Python writes it back; a name as typed)."""
    actions = []
    for number, target in enumerate(targets):
        host = target["host"]
        try:
            host = canonical_ip(host)
        except ValueError:
            pass
        action = {"type": "omfwd", "name": f"tusk_syslog_{number}", "target": host,
                  "port": str(target.get("port", 514)),
                  "protocol": target.get("transport", "udp")}
        if action["protocol"] == "tcp":
            action["TCP_Framing"] = "octet-counted"
        action.update({"template": "tusk_rfc5424", "queue.type": "LinkedList",
                       "queue.size": "10000", "action.resumeRetryCount": "-1",
                       "action.resumeInterval": "10"})
        actions.append(("action", action, None))
    return [("global", {"workDirectory": work_dir, "maxMessageSize": "8k"}, None),
            ("module", {"load": "imfile"}, None),
            ("template", {"name": "tusk_rfc5424", "type": "list"}, TEMPLATE),
            ("ruleset", {"name": "tusk_forward"}, actions),
            ("input", {"type": "imfile", "file": f"{log_dir}/firewall.json", "tag": "tusk",
                       "facility": "local0", "severity": "notice", "freshStartTail": "on",
                       "ruleset": "tusk_forward"}, None)]


@EXAMPLES
@given(targets=receivers())
@example(targets=[{"host": "192.0.2.10", "port": 514, "transport": "udp"},
                  {"host": "2001:DB8::0a", "port": 601, "transport": "tcp"},
                  {"host": "logs.example.net", "port": 6514, "transport": "tcp"}])
@example(targets=[{"host": '::1%"port="1")}\nmodule(load="omprog")', "port": 514,
                   "transport": "udp"}])
def test_rsyslog_conf_holds_exactly_the_receivers_the_check_accepted(targets):
    try:
        checked = log_settings.check({"syslog": targets})
    except log_settings.SettingsError:
        event("refused by the check")
        return
    event("accepted")
    log_dir, work_dir = os.path.join(SCRATCH, "logs"), os.path.join(SCRATCH, "syslog")
    os.makedirs(work_dir, exist_ok=True)
    text = forwarder.render(checked, log_dir, work_dir)
    assert rainerscript(text) == intended_rsyslog(targets, log_dir, work_dir)
    path = os.path.join(SCRATCH, "rsyslog.conf")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    checked_by_rsyslog = subprocess.run(["rsyslogd", "-N1", "-f", path], capture_output=True,
                                        text=True)
    assert checked_by_rsyslog.returncode == 0, checked_by_rsyslog.stderr


# -- systemd-networkd, -resolved, -timesyncd; /etc/hostname, /etc/timezone ---------------------

CIDR4 = st.tuples(st.integers(0x0A000001, 0x0AFFFFFE), st.integers(8, 30)).map(
    lambda t: f"{ipaddress.IPv4Address(t[0])}/{t[1]}")
CIDR6 = st.tuples(st.integers(2**127, 2**128 - 2), st.integers(16, 120)).map(
    lambda t: f"{ipaddress.IPv6Address(t[0])}/{t[1]}")
NETS = st.sampled_from(["10.20.0.0/16", "198.51.100.0/24", "2001:db8:20::/48", "default"])


NETWORK_FIELDS = ("hostname", "dns", "ntp", "timezone", "management", "traffic", "addresses",
                  "address", "mtu", "vlan", "vlan_id", "vlan_address", "destination",
                  "gateway", "bridge", "bridge_vlans", "bpdu", "bridge_mtu")


@st.composite
def network_documents(draw):
    """A valid network in which up to two values are poisoned (poisoning all at once
    would leave the check nothing to accept)."""
    bad = draw(st.sets(st.sampled_from(NETWORK_FIELDS), max_size=2))

    def value(field, valid):
        return draw(poisoned(valid) if field in bad else valid)

    traffic = value("traffic", st.sampled_from(["eth2", "ens4", "enp1s0f1"]))
    address = value("address", st.sampled_from(["10.1.0.1/24", "2001:db8:1::1/64"]))
    gateway_ok = "10.1.0.254" if address.startswith("10.") else "2001:db8:1::fe"
    stp = draw(st.booleans())
    bridges = [{"name": value("bridge", st.sampled_from(["br0", "dtn-bridge"])),
                "members": ["eth5", "eth6"], "stp": stp,
                "bpdu": value("bpdu", st.sampled_from(["forward"] if stp else
                                                      ["forward", "drop"])),
                "vlans": draw(st.lists(st.integers(-1, 5000), max_size=4)
                              if "bridge_vlans" in bad else
                              st.lists(st.integers(1, 4094), max_size=4, unique=True)),
                "mtu": draw(st.integers(-1, 70000) if "bridge_mtu" in bad
                            else st.sampled_from([0, 1500, 9000]))}] \
        if draw(st.booleans()) else []
    return {
        "system": {"hostname": value("hostname", HOSTNAMES),
                   "dns": draw(st.lists(poisoned(st.one_of(IPV4, IPV6, SCOPED))
                                        if "dns" in bad else st.one_of(IPV4, IPV6),
                                        max_size=3)),
                   "ntp": draw(st.lists(poisoned(st.one_of(IPV4, IPV6, HOSTNAMES))
                                        if "ntp" in bad else st.one_of(IPV4, IPV6, HOSTNAMES),
                                        max_size=3)),
                   "timezone": value("timezone", st.sampled_from(
                       ["UTC", "Europe/Zurich", "America/New_York"]))},
        "interfaces": [{"name": "eth1", "role": "management",
                        "addresses": [value("management", st.just("192.0.2.1/24"))]},
                       {"name": traffic, "role": "traffic",
                        "addresses": draw(st.lists(poisoned(st.one_of(CIDR4, CIDR6))
                                                   if "addresses" in bad
                                                   else st.one_of(CIDR4, CIDR6), max_size=2))
                        + [address],
                        "mtu": draw(st.integers(-1, 70000) if "mtu" in bad
                                    else st.sampled_from([1500, 9000]))}] +
                      [{"name": name, "role": "traffic"} for name in ("eth5", "eth6")
                       if bridges],
        "bridges": bridges,
        "vlans": [{"name": value("vlan", st.sampled_from(["v100", "eth2.100"])),
                   "parent": traffic,
                   "id": draw(st.integers(-1, 5000) if "vlan_id" in bad
                              else st.integers(1, 4094)),
                   "addresses": [value("vlan_address", st.just("10.99.0.1/24"))]}],
        "routes": [{"destination": value("destination", NETS),
                    "gateway": value("gateway", st.just(gateway_ok)), "interface": traffic,
                    "metric": draw(st.integers(0, 100))}],
    }


FIXED = {"yes", "no", "down", "ipv4", "ipv6", "fast", "100ms", "vlan", "bond"}
NETWORK_KEYS = {"Match": {"Name"}, "Link": {"ActivationPolicy", "RequiredForOnline", "MTUBytes"},
                "Network": {"Bond", "DHCP", "Address", "LinkLocalAddressing", "IPv6AcceptRA",
                            "ConfigureWithoutCarrier", "VLAN", "Bridge"},
                "BridgeVLAN": {"VLAN"},
                "Route": {"Destination", "Gateway", "Metric"}}
NETDEV_KEYS = {"NetDev": {"Name", "Kind"}, "VLAN": {"Id"},
               "Bond": {"Mode", "TransmitHashPolicy", "MIIMonitorSec", "LACPTransmitRate"},
               "Bridge": {"STP", "MulticastSnooping", "VLANFiltering"}}


def intended_values(document, config):
    """{(link, key): [canonical values]} of everything the operator gave each link."""
    found = {}
    links = document["interfaces"] + document["vlans"] + document["bridges"]
    for link in links:
        name = link["name"]
        bridge = next((b for b in document["bridges"] if name in b["members"]), None)
        found[(name, "Name")] = [name]
        found[(name, "Address")] = [canonical_cidr(a) for a in link.get("addresses", [])]
        found[(name, "VLAN")] = [v["name"] for v in document["vlans"] if v["parent"] == name]
        found[(name, "Bridge")] = [bridge["name"]] if bridge else []
        found[(name, "BridgeVLAN")] = [str(v) for v in bridge["vlans"]] if bridge else []
        mtu = link.get("mtu") or (bridge["mtu"] if bridge else 0)
        found[(name, "MTUBytes")] = [str(mtu)] if mtu else []
        routes = [r for r in document["routes"] if r["interface"] == name]
        found[(name, "Destination")] = [
            str(ipaddress.ip_network(r["destination"])) if r["destination"] != "default"
            else ("::/0" if ":" in r["gateway"] else "0.0.0.0/0") for r in routes]
        found[(name, "Gateway")] = [canonical_ip(r["gateway"]) for r in routes]
        found[(name, "Metric")] = [str(r["metric"]) for r in routes if r["metric"]]
    assert {link.name for link in config.links} == {link["name"] for link in links}
    return found


ISSUE_DNS = {"system": {"hostname": "tusk", "dns": ["2001:db8::53%\n[Resolve]\n"
                                                    "DNSStubListenerExtra=0.0.0.0"],
                        "ntp": ["0.pool.ntp.org"], "timezone": "UTC"},
             "interfaces": [{"name": "eth1", "role": "management",
                             "addresses": ["192.0.2.1/24"]}],
             "vlans": [], "bridges": [], "routes": []}


@EXAMPLES
@given(document=network_documents())
@example(document=ISSUE_DNS)
def test_networkd_files_hold_exactly_the_network_the_check_accepted(document):
    try:
        config = network_normalise.from_document(document)
    except NetworkError:
        event("refused by the check")
        return
    event("accepted")
    intended = intended_values(document, config)
    files = networkd.render_links(config)
    for path, text in files.items():
        entries = systemd_ini(text)
        link = networkd.link_of(path)
        keys = NETWORK_KEYS if path.endswith(".network") else NETDEV_KEYS
        sections = [section for section, _ in _sections(text)]
        assert set(sections) <= set(keys), (path, sections)
        for section, key, _ in entries:
            assert key in keys[section], (path, section, key)
        if path.endswith(".netdev"):
            bridge = next((b for b in document["bridges"] if b["name"] == link), None)
            if bridge:
                assert entries == [("NetDev", "Name", link), ("NetDev", "Kind", "bridge"),
                                   ("Bridge", "STP", "yes" if bridge["stp"] else "no"),
                                   ("Bridge", "MulticastSnooping", "no"),
                                   ("Bridge", "VLANFiltering",
                                    "yes" if bridge["vlans"] else "no")]
                continue
            vlan = next(v for v in document["vlans"] if v["name"] == link)
            assert entries == [("NetDev", "Name", link), ("NetDev", "Kind", "vlan"),
                               ("VLAN", "Id", str(vlan["id"]))]
            continue
        for key in ("Name", "Address", "MTUBytes", "Destination", "Gateway", "Metric",
                    "Bridge"):
            assert [v for _, k, v in entries if k == key] == intended[(link, key)], (path, key)
        for section, key in (("Network", "VLAN"), ("BridgeVLAN", "BridgeVLAN")):
            assert [v for s, k, v in entries if s == section and k == "VLAN"] == \
                intended[(link, key)], (path, section)
        others = {v for _, k, v in entries if k not in intended_keys()}
        assert others <= FIXED, (path, others)
        assert sections == ["Match", "Link", "Network"] + ["BridgeVLAN"] * len(
            intended[(link, "BridgeVLAN")]) + ["Route"] * len(intended[(link, "Gateway")])
    system = networkd.render_system(config)
    dns = " ".join(canonical_ip(s) for s in document["system"]["dns"])
    ntp = " ".join(_canonical_host(s) for s in document["system"]["ntp"])
    assert systemd_ini(system[networkd.RESOLVED_DROPIN]) == [
        ("Resolve", "DNS", dns), ("Resolve", "FallbackDNS", "")]
    assert systemd_ini(system[networkd.TIMESYNCD_DROPIN]) == [
        ("Time", "NTP", ntp), ("Time", "FallbackNTP", "")]
    assert system[networkd.HOSTNAME_FILE] == document["system"]["hostname"] + "\n"
    assert system[networkd.TIMEZONE_FILE] == document["system"]["timezone"] + "\n"


def intended_keys():
    return {"Name", "Address", "VLAN", "MTUBytes", "Destination", "Gateway", "Metric",
            "Bridge"}


DROPPING = {"system": ISSUE_DNS["system"] | {"dns": []},
            "interfaces": ISSUE_DNS["interfaces"] + [{"name": n, "role": "traffic"} for n in
                                                     ("eth5", "eth6", "dtn1", "dtn2")],
            "vlans": [], "routes": [],
            "bridges": [{"name": "br0", "members": ["eth5", "eth6"], "bpdu": "drop"},
                        {"name": "br1", "members": ["dtn1", "dtn2"], "stp": True}]}


@EXAMPLES
@given(document=network_documents())
@example(document=DROPPING)
def test_the_bpdu_table_drops_exactly_on_the_bridges_the_check_accepted(document,
                                                                         scratch_netns):
    """network/core/bpdu.py's table, loaded by nft and listed back as JSON: one rule per
    bridge with bpdu = "drop" (and no STP), on exactly its members."""
    try:
        config = network_normalise.from_document(document)
    except NetworkError:
        event("refused by the check")
        return
    text = bpdu.render(config)
    loaded = subprocess.run(["ip", "netns", "exec", scratch_netns, "nft", "-f", "-"],
                            input=text, capture_output=True, text=True)
    assert loaded.returncode == 0, loaded.stderr
    listed = subprocess.run(["ip", "netns", "exec", scratch_netns, "nft", "-j", "list",
                             "ruleset"], capture_output=True, text=True, check=True)
    found = []
    for item in json.loads(listed.stdout)["nftables"]:
        rule = item.get("rule")
        if rule and rule["table"] == "tusk_bpdu":
            ports = rule["expr"][0]["match"]["right"]
            ports = sorted(ports["set"] if isinstance(ports, dict) else [ports])
            found.append((ports, rule["expr"][1]["match"]["right"]))
    intended = [(sorted(b["members"]), "01:80:c2:00:00:00") for b in document["bridges"]
                if b.get("bpdu") == "drop" and not b.get("stp")]
    event("bpdu drop" if intended else "no bpdu drop")
    assert found == intended
    subprocess.run(["ip", "netns", "exec", scratch_netns, "nft", "-f", "-"],
                   input=bpdu.HEAD, check=True, text=True)


def _canonical_host(text):
    try:
        return canonical_ip(text)
    except ValueError:
        return text


def _sections(text):
    return [(line[1:-1], None) for line in (raw.strip() for raw in text.split("\n"))
            if line.startswith("[")]


# -- keepalived and conntrackd (ha/core/render.py); the host table (render_boot.host) ----------

PAIRS = st.sampled_from([("192.168.255.1/30", "192.168.255.2"), ("10.9.9.1/24", "10.9.9.77"),
                         ("fd00:9::1/64", "fd00:9::2"), ("2001:db8:ff::a/126", "2001:db8:ff::b")])


HA_FIELDS = ("vrid", "sync_interface", "sync_address", "peer_address", "interface",
             "addresses")


@st.composite
def ha_documents(draw):
    """A valid pair in which up to two values are poisoned."""
    bad = draw(st.sets(st.sampled_from(HA_FIELDS), max_size=2))

    def value(field, valid, trouble=None):
        return draw((poisoned(valid) if trouble is None else trouble) if field in bad else valid)

    sync, peer = draw(PAIRS)
    addresses = st.one_of(st.sampled_from(["198.51.100.1/24", "2001:db8:100::1/64"]),
                          CIDR4, CIDR6)
    return {"ha": {"enabled": True, "role": draw(st.sampled_from(["primary", "secondary"])),
                   "vrid": value("vrid", st.integers(1, 255), st.integers(-1, 300)),
                   "advert_ms": draw(st.sampled_from([100, 1000, 2550, 40950])),
                   "preempt": draw(st.booleans()),
                   "sync_interface": value("sync_interface", st.one_of(
                       st.sampled_from(["ens6", "eth3", "sync0", "bond1.7"]), IFNAMES)),
                   "sync_address": value("sync_address", st.just(sync)),
                   "peer_address": value("peer_address", st.just(peer),
                                         poisoned(st.one_of(st.just(peer), SCOPED)))},
            "virtual": [{"interface": value("interface", st.one_of(
                st.sampled_from(["ens4", "ens4.100", "bond0"]), IFNAMES)),
                "addresses": draw(st.lists(poisoned(addresses) if "addresses" in bad
                                           else addresses, min_size=1, max_size=3))}]}


def intended_keepalived(document, state_dir, notify):
    ha = document["ha"]
    segment = document["virtual"][0]
    interface = segment["interface"]
    safe = "".join(c if c.isascii() and c.isalnum() else "_" for c in interface)
    addresses = [ipaddress.ip_interface(a) for a in segment["addresses"]]
    instances = []
    for version in (4, 6):
        mine = [str(a) for a in addresses if a.version == version]
        if not mine:
            continue
        body = [(("state", "BACKUP"), None), (("interface", interface), None),
                (("virtual_router_id", str(ha["vrid"])), None),
                (("priority", "200" if ha["role"] == "primary" else "100"), None),
                (("advert_int", f"{ha['advert_ms'] / 1000:.2f}".rstrip("0").rstrip(".")), None)]
        if not ha["preempt"]:
            body.append((("nopreempt",), None))
        body.append((("virtual_ipaddress",), [((a, "dev", interface), None) for a in mine]))
        instances.append((("vrrp_instance", f"tusk_{safe}_v{version}"), body))
    return [(("global_defs",), [
        (("router_id", f"tusk-{ha['role']}"), None), (("vrrp_version", "3"), None),
        (("enable_script_security",), None), (("script_user", "root"), None),
        (("notify_fifo", f"{state_dir}/notify.fifo"), None),
        (("notify_fifo_script", f'"{notify} {state_dir} {state_dir}/conntrackd.conf"'), None)]),
        (("vrrp_sync_group", "tusk"), [(("group",), [((name[1],), None)
                                                     for name, _ in instances])]),
        *instances]


def find(tree, *path):
    for heads, children in tree:
        if heads == path[0]:
            return children if len(path) == 1 else find(children, *path[1:])
    raise AssertionError(f"{path[0]} not in {[h for h, _ in tree]}")


@pytest.fixture(scope="module")
def scratch_netns():
    """A namespace where keepalived's config test finds the interfaces a file names."""
    name = f"tusk-prop-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    yield name
    subprocess.run(["ip", "netns", "del", name], check=False)


@EXAMPLES
@given(document=ha_documents())
@example(document={"ha": {"enabled": True, "role": "primary", "vrid": 51, "advert_ms": 1000,
                          "preempt": False, "sync_interface": "abc",
                          "sync_address": "192.168.255.1/30", "peer_address": "192.168.255.2"},
                   "virtual": [{"interface": "ens4", "addresses": ["198.51.100.1/24"]}]})
def test_keepalived_and_conntrackd_files_hold_exactly_the_pair_the_check_accepted(
        document, scratch_netns):
    try:
        config = ha_config.from_document(document)
    except ha_config.HaError:
        event("refused by the check")
        return
    event("accepted")
    state_dir = os.path.join(SCRATCH, "ha")
    os.makedirs(state_dir, exist_ok=True)
    notify = "/usr/lib/tusk/ha-notify"
    keepalived_text = ha_render.keepalived_conf(config, state_dir, notify=notify)
    assert blocks(keepalived_text, "#!") == intended_keepalived(document, state_dir, notify)
    conntrackd_text = ha_render.conntrackd_conf(config, state_dir)
    tree = blocks(conntrackd_text, "#")
    assert [heads for heads, _ in tree] == [("Sync",), ("General",)]
    sync = ipaddress.ip_interface(document["ha"]["sync_address"])
    peer = canonical_ip(document["ha"]["peer_address"])
    assert find(tree, ("Sync",), ("UDP",)) == [
        ((f"IPv{sync.version}_address", str(sync.ip)), None),
        ((f"IPv{sync.version}_Destination_Address", peer), None), (("Port", "3780"), None),
        (("Interface", document["ha"]["sync_interface"]), None),
        (("SndSocketBuffer", "1249280"), None), (("RcvSocketBuffer", "1249280"), None),
        (("Checksum", "on"), None)]
    ignored = {str(sync.ip), "127.0.0.1", "::1"} | {
        str(ipaddress.ip_interface(a).ip) for a in document["virtual"][0]["addresses"]}
    found = find(tree, ("General",), ("Filter", "From", "Kernelspace"), ("Address", "Ignore"))
    assert sorted(heads for heads, _ in found) == sorted(
        (f"IPv{ipaddress.ip_address(a).version}_address", a) for a in ignored)
    _check_with_the_daemons(keepalived_text, conntrackd_text, document, scratch_netns)
    host_table = render_boot.host("eth1", config)
    checked = subprocess.run(["ip", "netns", "exec", scratch_netns, "nft", "-c", "-f", "-"],
                             input=host_table, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    assert host_table.count(f"saddr {peer} ") == 2


@st.composite
def cluster_syncs(draw):
    """(sync interface, sync address, the box's other addresses), one of them poisoned
    at most."""
    bad = draw(st.sets(st.sampled_from(["interface", "address", "local"]), max_size=1))

    def value(field, valid):
        return draw(poisoned(valid) if field in bad else valid)
    return (value("interface", st.one_of(st.sampled_from(["sync0", "ens6", "bond1.7"]),
                                         IFNAMES)),
            value("address", st.one_of(st.sampled_from(["192.168.255.1/24", "10.9.9.3/29"]),
                                       CIDR4, CIDR6)),
            draw(st.lists(poisoned(st.one_of(CIDR4, CIDR6)) if "local" in bad
                          else st.one_of(CIDR4, CIDR6), max_size=3)))


@EXAMPLES
@given(sync=cluster_syncs())
def test_a_cluster_boxs_conntrackd_conf_holds_exactly_what_it_was_given(sync):
    """A cluster's conntrackd.conf (docs/SCALE.md): refused, or conntrackd's own parser
    takes it and it holds exactly NOTRACK over the multicast group on the sync link, the
    box's addresses ignored."""
    interface, address, local = sync
    try:
        text = ha_render.conntrackd_cluster_conf(ha_config.HaConfig(
            enabled=True, role=None, vrid=0, advert_ms=0, preempt=False,
            sync_interface=interface, sync_address=address, peer_address=None, virtual=(),
            mode=ha_config.CLUSTER), "/run/tusk/ha", local)
    except (ha_render.RenderRefused, FormatRefused):
        event("refused")
        return
    event("rendered")
    sync = ipaddress.ip_interface(address)
    assert sync.version == 4 and values.InterfaceName(interface).text == interface
    tree = blocks(text, "#")
    assert find(tree, ("Sync",), ("Mode", "NOTRACK")) == [
        (("DisableExternalCache", "on"), None), (("StartupResync", "on"), None)]
    assert find(tree, ("Sync",), ("Multicast",)) == [
        (("IPv4_address", ha_render.CLUSTER_GROUP), None), (("Group", "3780"), None),
        (("IPv4_interface", str(sync.ip)), None), (("Interface", interface), None),
        (("SndSocketBuffer", "1249280"), None), (("RcvSocketBuffer", "1249280"), None),
        (("Checksum", "on"), None)]
    ignored = {str(sync.ip), "127.0.0.1", "::1"} | {
        str(ipaddress.ip_interface(a).ip) for a in local}
    found = find(tree, ("General",), ("Filter", "From", "Kernelspace"), ("Address", "Ignore"))
    assert sorted(heads for heads, _ in found) == sorted(
        (f"IPv{ipaddress.ip_address(a).version}_address", a) for a in ignored)
    conf = os.path.join(tempfile.mkdtemp(dir=SCRATCH), "conntrackd.conf")
    with open(conf, "w", encoding="utf-8") as handle:
        handle.write(text)
    result = subprocess.run(["conntrackd", "-C", conf, "-s"], capture_output=True, text=True)
    assert "parsing config file" not in result.stdout + result.stderr, result.stderr


def _check_with_the_daemons(keepalived_text, conntrackd_text, document, netns):
    """keepalived's own config test, with the interfaces the file names present in a
    namespace of their own; conntrackd's own parser (-s reads the file, then finds no
    daemon to ask: a file it cannot parse fails before that)."""
    directory = tempfile.mkdtemp(dir=SCRATCH)
    names = {document["virtual"][0]["interface"]}
    made = []
    for name in names:
        if subprocess.run(["ip", "-n", netns, "link", "add", name, "type", "veth", "peer",
                           "name", "tusk-prop-peer"], capture_output=True).returncode == 0:
            made.append(name)
    try:
        conf = os.path.join(directory, "keepalived.conf")
        with open(conf, "w", encoding="utf-8") as handle:
            handle.write(keepalived_text)
        log = os.path.join(directory, "config-test.log")
        result = subprocess.run(["ip", "netns", "exec", netns, "keepalived",
                                 f"--config-test={log}", "-f", conf], capture_output=True,
                                text=True)
        said = open(log, encoding="utf-8").read() if os.path.exists(log) else ""
        # what keepalived may say of a good file: one segment makes a sync group of one
        # instance or two (it warns: the group is there so that more segments move
        # together); a name the test could not create (the kernel refused it) is missing
        benign = ["has only 1 virtual router(s)"]
        if made != list(names):
            event("keepalived: an interface the kernel would not create")
            benign += ["doesn't exist", "Non-existent interface"]
        complaints = [line for line in said.splitlines()
                      if line.strip() and not any(words in line for words in benign)]
        assert not complaints and result.returncode in (0, 5), said + result.stderr
    finally:
        for name in made:
            subprocess.run(["ip", "-n", netns, "link", "del", name], check=False)
    conf = os.path.join(directory, "conntrackd.conf")
    with open(conf, "w", encoding="utf-8") as handle:
        handle.write(conntrackd_text)
    result = subprocess.run(["conntrackd", "-C", conf, "-s"], capture_output=True, text=True)
    assert "parsing config file" not in result.stdout + result.stderr, result.stderr


# -- FRR's frr.conf (the Network page's routing) ----------------------------------------------

ROUTING_FIELDS = ("router_id", "asn", "prefix", "community", "neighbour", "remote_as",
                  "password", "accept", "ospf_interface", "area", "cost", "bfd_interval")
PASSWORDS = st.from_regex(r"[A-Za-z0-9_.,:;+=/@%^*~-]{1,80}", fullmatch=True)
WELL_KNOWN = {"65535:0": "graceful-shutdown", "65535:1": "accept-own", "65535:666": "blackhole",
              "65535:65281": "no-export", "65535:65282": "no-advertise",
              "65535:65283": "local-AS", "65535:65284": "no-peer"}


@st.composite
def routing_documents(draw):
    """A network with routing on eth2 (10.1.0.1/24, 2001:db8:1::1/64), up to two of its
    values poisoned; descriptions always are (they never reach FRR's file)."""
    bad = draw(st.sets(st.sampled_from(ROUTING_FIELDS), max_size=2))

    def value(field, valid):
        return draw(poisoned(valid) if field in bad else valid)

    def values(field, valid):
        return poisoned(valid) if field in bad else valid

    def number(field, low, high):
        return draw(st.integers(low - 2, high + 2) if field in bad else st.integers(low, high))

    prefixes = st.sampled_from(["10.30.0.0/16", "198.51.100.0/24", "10.1.0.0/24",
                                "2001:db8:30::/48", "0.0.0.0/0", "::/0", "10.9.9.9/32"])
    neighbours = []
    for address in draw(st.lists(st.sampled_from(["10.1.0.2", "10.1.0.77", "2001:db8:1::2"]),
                                 unique=True, max_size=3)):
        neighbours.append({
            "address": value("neighbour", st.just(address)),
            "remote_as": number("remote_as", 1, 2**32 - 1),
            "password": value("password", st.one_of(st.just(""), PASSWORDS)),
            "bfd": draw(st.booleans()),
            "accept": draw(st.lists(values("accept", prefixes), max_size=3, unique=True)),
            "blackhole": draw(st.booleans()),
            "description": draw(poisoned(st.text(max_size=20)))})
    ospf = [{"interface": value("ospf_interface", st.just("eth2")),
             "area": value("area", st.sampled_from(["0", "0.0.0.0", "10", "0.0.0.51"])),
             "cost": number("cost", 0, 65535), "passive": draw(st.booleans()),
             "point_to_point": draw(st.booleans()), "bfd": draw(st.booleans())}] \
        if draw(st.booleans()) else []
    return {
        "interfaces": [{"name": "eth1", "role": "management", "addresses": ["192.0.2.1/24"]},
                       {"name": "eth2", "role": "traffic",
                        "addresses": ["10.1.0.1/24", "2001:db8:1::1/64"]}],
        "routing": {
            "router_id": value("router_id", st.sampled_from(["", "10.1.0.1", "192.0.2.9"])),
            "bfd_interval": number("bfd_interval", 10, 60000),
            "bfd_multiplier": draw(st.integers(2, 255)),
            "standby": draw(st.booleans()),
            "bgp": {"asn": number("asn", 1, 2**32 - 1),
                    "prefixes": draw(st.lists(values("prefix", prefixes), max_size=3,
                                              unique=True)),
                    "communities": draw(st.lists(values("community", st.one_of(
                        st.tuples(st.integers(0, 65535), st.integers(0, 65535)).map(
                            lambda t: f"{t[0]}:{t[1]}"),
                        st.sampled_from(["no-export", "NO-ADVERTISE", "65535:666"]))),
                        max_size=3, unique=True)),
                    "blackholes": draw(st.lists(values("prefix", st.sampled_from(
                        ["203.0.113.66/32", "2001:db8:66::1/128", "203.0.113.0/24"])),
                        max_size=2, unique=True)),
                    "neighbours": neighbours},
            "ospf": ospf}}


def _community(text):
    return WELL_KNOWN.get(text, {"no-advertise": "no-advertise"}.get(text.lower(), text))


def intended_frr(document):  # noqa: C901 - the file's every command, one case each
    """frr_commands() of what the document means, built from the document alone."""
    routing, found = document["routing"], []
    bgp = routing["bgp"]
    router = ("router", "bgp", str(bgp["asn"]))
    announced = [ipaddress.ip_network(p) for p in bgp["prefixes"]]
    neighbours = [(ipaddress.ip_address(n["address"]), n) for n in bgp["neighbours"]]
    communities = [_community(c) for c in bgp["communities"]]
    families = sorted({a.version for a, _ in neighbours} | {p.version for p in announced})
    bfd = any(n["bfd"] for n in bgp["neighbours"]) or any(o["bfd"] for o in routing["ospf"])
    found.append((router,))
    blackholes = any(n["blackhole"] for _, n in neighbours)
    if blackholes:
        found += [(("bgp", "community-list", "standard", "TUSK-BLACKHOLE", "seq", "5", "permit",
                    "blackhole"),),
                  (("route-map", "TUSK-BLACKHOLE", "permit", "10"),),
                  (("route-map", "TUSK-BLACKHOLE", "permit", "10"), ("match", "tag", "666")),
                  (("route-map", "TUSK-BLACKHOLE", "permit", "10"),
                   ("set", "community", "blackhole"))]
    for text in bgp["blackholes"]:
        host = ipaddress.ip_network(text)
        found.append((("ip" if host.version == 4 else "ipv6", "route", str(host), "blackhole",
                       "tag", "666"),))
    if routing["router_id"]:
        found.append((router, ("bgp", "router-id", routing["router_id"])))
    found.append((router, ("no", "bgp", "default", "ipv4-unicast")))
    for version in families:
        ip, tag = ("ip", "V4") if version == 4 else ("ipv6", "V6")
        mine = [p for p in announced if p.version == version]
        for seq, prefix in enumerate(mine, 1):
            found.append(((ip, "prefix-list", f"TUSK-ANNOUNCE-{tag}", "seq", str(seq * 5),
                           "permit", str(prefix)),))
        maps = [(f"TUSK-OUT-{tag}", False)]
        if any(n["blackhole"] for a, n in neighbours if a.version == version):
            maps.append((f"TUSK-OUT-BH-{tag}", True))
        for name, passes_blackholes in maps:
            if not mine and not passes_blackholes:
                found.append((("route-map", name, "deny", "10"),))
            if mine:
                out = ("route-map", name, "permit", "10")
                found += [(out,), (out, ("match", ip, "address", "prefix-list",
                                         f"TUSK-ANNOUNCE-{tag}"))]
                if communities:
                    found.append((out, ("set", "community", *communities, "additive")))
                if routing["standby"]:
                    found.append((out, ("set", "as-path", "prepend",
                                        *[str(bgp["asn"])] * 3)))
            if passes_blackholes:
                more = ("route-map", name, "permit", "20")
                found += [(more,), (more, ("match", "community", "TUSK-BLACKHOLE")),
                          (more, ("set", "community", "no-export", "additive"))]
        family = ("address-family", f"ipv{version}", "unicast")
        found.append((router, family))
        found += [(router, family, ("network", str(p))) for p in mine]
        if blackholes:
            found.append((router, family, ("redistribute", "static", "route-map",
                                           "TUSK-BLACKHOLE")))
        for number, (address, neighbour) in enumerate(neighbours, 1):
            if address.version == version:
                out = f"TUSK-OUT-BH-{tag}" if neighbour["blackhole"] else f"TUSK-OUT-{tag}"
                found += [(router, family, ("neighbor", str(address), "activate")),
                          (router, family, ("neighbor", str(address), "route-map",
                                            f"TUSK-IN-{number}", "in")),
                          (router, family, ("neighbor", str(address), "route-map", out,
                                            "out"))]
    for number, (address, neighbour) in enumerate(neighbours, 1):
        ip, longest = ("ip", 32) if address.version == 4 else ("ipv6", 128)
        accept = [p for p in map(ipaddress.ip_network, neighbour["accept"])
                  if p.version == address.version]
        for seq, prefix in enumerate(accept, 1):
            more = ("le", str(longest)) if prefix.prefixlen < longest else ()
            found.append(((ip, "prefix-list", f"TUSK-ACCEPT-{number}", "seq", str(seq * 5),
                           "permit", str(prefix), *more),))
        in_map = ("route-map", f"TUSK-IN-{number}", "permit" if accept else "deny", "10")
        found.append((in_map,))
        if accept:
            found.append((in_map, ("match", ip, "address", "prefix-list",
                                   f"TUSK-ACCEPT-{number}")))
        found.append((router, ("neighbor", str(address), "remote-as",
                               str(neighbour["remote_as"]))))
        if neighbour["password"]:
            found.append((router, ("neighbor", str(address), "password",
                                   neighbour["password"])))
        if neighbour["bfd"]:
            found += [(router, ("neighbor", str(address), "bfd")),
                      (router, ("neighbor", str(address), "bfd", "profile", "tusk"))]
    if not bgp["asn"]:
        found = []
    for link in routing["ospf"]:
        interface = ("interface", link["interface"])
        area = link["area"] if "." in link["area"] else str(
            ipaddress.IPv4Address(int(link["area"])))
        found.append((interface,))
        for proto in (("ip", "ospf"), ("ipv6", "ospf6")):
            found.append((interface, (*proto, "area", area)))
            cost = 65535 if routing["standby"] else link["cost"]
            if cost:
                found.append((interface, (*proto, "cost", str(cost))))
            if link["passive"]:
                found.append((interface, (*proto, "passive")))
            if link["point_to_point"]:
                found.append((interface, (*proto, "network", "point-to-point")))
            if link["bfd"]:
                found += [(interface, (*proto, "bfd")),
                          (interface, (*proto, "bfd", "profile", "tusk"))]
    for router_name in (("ospf", "ospf6") if routing["ospf"] else ()):
        found.append((("router", router_name),))
        if routing["router_id"]:
            found.append((("router", router_name), (router_name, "router-id",
                                                    routing["router_id"])))
    if bfd:
        profile = ("profile", "tusk")
        found += [(("bfd",),), (("bfd",), profile)]
        found += [(("bfd",), profile, (key, str(routing["bfd_interval"])))
                  for key in ("transmit-interval", "receive-interval")]
        found.append((("bfd",), profile, ("detect-multiplier",
                                          str(routing["bfd_multiplier"]))))
    return sorted(found)


@EXAMPLES
@given(document=routing_documents())
@example(document={"interfaces": [{"name": "eth2", "role": "traffic",
                                   "addresses": ["10.1.0.1/24"]}],
                   "routing": {"bgp": {"asn": 65001, "neighbours": [
                       {"address": "10.1.0.2", "remote_as": 65002,
                        "password": "x\n neighbor 10.1.0.2 shutdown"}]}}})
def test_frr_conf_holds_exactly_the_routing_the_check_accepted(document, scratch_netns):
    """FRR's own parser (`vtysh -C`) takes the file, and it holds exactly the intended
    commands; the daemons' own readback is tests/netns/test_routing.py's. The host table
    for it passes nft -c and admits exactly the neighbours and links."""
    try:
        config = network_normalise.from_document(document)
    except NetworkError:
        event("refused")
        return
    event("accepted")
    text = frr.render(config)
    path = os.path.join(SCRATCH, "frr.conf")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    checked = subprocess.run(["vtysh", "-C", "-f", path], capture_output=True, text=True)
    assert checked.returncode == 0, (checked.stdout, checked.stderr, text)
    assert frr_commands(text) == intended_frr(document), text
    for neighbour in document["routing"]["bgp"]["neighbours"]:
        neighbour["description"] = ""      # Tusk's note only: the file is the same without
    assert frr.render(network_normalise.from_document(document)) == text
    host_table = render_boot.host("eth1", None, config.routing)
    checked = subprocess.run(["ip", "netns", "exec", scratch_netns, "nft", "-c", "-f", "-"],
                             input=host_table, capture_output=True, text=True)
    assert checked.returncode == 0, (checked.stderr, host_table)
    assert [line.strip() for line in host_table.splitlines()
            if re.search(r'"tusk: (BGP|BFD|OSPF)', line)] == intended_host_routing(document)


def intended_host_routing(document):
    """The host table's routing rules for what the document means, from it alone."""
    routing, lines = document["routing"], []
    neighbours = routing["bgp"]["neighbours"]
    for family, ttl, six in (("ip", "ip ttl", False), ("ip6", "ip6 hoplimit", True)):
        mine = [n for n in neighbours if (":" in n["address"]) == six]
        if mine:
            lines.append(f"{family} saddr {{ {', '.join(n['address'] for n in mine)} }} "
                         'tcp dport 179 accept comment "tusk: BGP from the neighbours"')
        if any(n["bfd"] for n in mine):
            lines.append(f"{family} saddr {{ {', '.join(n['address'] for n in mine if n['bfd'])}"
                         f" }} {ttl} 255 udp dport {{ 3784, 3785 }} accept comment "
                         '"tusk: BFD from the BGP neighbours"')
    active = [link for link in routing["ospf"] if not link["passive"]]
    if active:
        lines.append('iifname { "eth2" } meta l4proto 89 accept comment "tusk: OSPF on its '
                     'links"')
    if any(link["bfd"] for link in active):
        lines += [f'iifname {{ "eth2" }} {ttl} 255 udp dport {{ 3784, 3785 }} accept comment '
                  '"tusk: BFD of the OSPF neighbours"' for ttl in ("ip ttl", "ip6 hoplimit")]
    return lines


# -- TOML that Tusk writes for itself (network.toml, ha.toml) ---------------------------------

@settings(max_examples=500)
@given(value=st.one_of(st.text(), st.integers(-2**63, 2**63 - 1), st.booleans(),
                       st.lists(st.text(), max_size=4)))
def test_the_toml_writer_reads_back_as_the_value_it_was_given(value):
    assert tomllib.loads(f"key = {toml_value(value)}\n") == {"key": value}


@EXAMPLES
@given(document=ha_documents())
def test_ha_toml_reads_back_as_the_pair_it_was_written_from(document):
    try:
        config = ha_config.from_document(document)
    except ha_config.HaError:
        return
    assert ha_config.parse(ha_config.to_toml(config)) == config


@EXAMPLES
@given(document=network_documents())
def test_network_toml_reads_back_as_the_network_it_was_written_from(document):
    try:
        config = network_normalise.from_document(document)
    except NetworkError:
        return
    assert network_normalise.parse(network_normalise.to_toml(config)) == config


# -- tusk-flowexport (flows/core/export.py) -----------------------------------------------------

@st.composite
def export_documents(draw):
    """Up to five collectors (four is the most), any of whose values may be poisoned, and
    the protocol and the active timeout, either of which may be."""
    count = draw(st.integers(0, 5))
    bad = draw(st.sets(st.tuples(st.integers(0, max(count - 1, 0)),
                                 st.sampled_from(["address", "port"])), max_size=2))
    valid = {"address": st.one_of(IPV4, IPV6), "port": st.integers(1, 65535)}
    trouble = {"address": poisoned(st.one_of(IPV4, IPV6, SCOPED, HOSTNAMES)),
               "port": st.one_of(st.integers(-2, 70000), poisoned(st.just("4739")))}
    collectors = [{field: draw(trouble[field] if (number, field) in bad else valid[field])
                   for field in valid} for number in range(count)]
    document = {"collectors": collectors}
    if draw(st.booleans()):
        document["protocol"] = draw(st.one_of(st.sampled_from(["ipfix", "netflow9"]),
                                              poisoned(st.just("ipfix"))))
    if draw(st.booleans()):
        document["active_timeout"] = draw(st.one_of(st.integers(0, 4000),
                                                    poisoned(st.just("60"))))
    return document


@given(document=export_documents())
@example(document={"collectors": [{"address": '192.0.2.1", "port": 1, "x": "', "port": 9}]})
@example(document={"protocol": "netflow9", "collectors": [{"address": "2001:DB8::0A"}]})
def test_the_exporters_file_holds_exactly_the_collectors_the_check_accepted(document):
    """The exporter's file is JSON of the checked values: read back by the exporter's own
    reader (export.parse, the same check), it is the same settings; as JSON, exactly the
    intended keys and the values' canonical text."""
    from flows.core import export
    try:
        checked = export.check(document)
    except export.ExportError:
        event("refused by the check")
        return
    event("accepted")
    text = export.render(checked)
    assert export.parse(text) == checked
    protocol = document.get("protocol", "ipfix")
    assert json.loads(text) == {
        "protocol": protocol, "active_timeout": document.get("active_timeout", 60),
        "collectors": [{"address": canonical_ip(c["address"]),
                        "port": c.get("port", export.DEFAULT_PORT[protocol])}
                       for c in document["collectors"]]}
    for collector in checked.collectors:
        ip = ipaddress.ip_address(str(collector.address))
        assert not (ip.is_loopback or ip.is_multicast or ip.is_unspecified)


PASSPHRASES = st.from_regex(r"[A-Za-z0-9_.,:;+=/@%^*~-]{8,64}", fullmatch=True)
TEXTS = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=80)
SNMP_NAMES = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,31}", fullmatch=True)
SNMP_PREFIXES = st.one_of(
    st.tuples(IPV4, st.integers(8, 32)).map(
        lambda t: str(ipaddress.ip_network(f"{t[0]}/{t[1]}", strict=False))),
    st.tuples(IPV6, st.integers(16, 128)).map(
        lambda t: str(ipaddress.ip_network(f"{t[0]}/{t[1]}", strict=False))))


@st.composite
def snmp_documents(draw):
    """snmp.toml with up to three users and a community, one or two values poisoned (or
    none): the text a manager reads back (quotes, backslashes, #), names, passphrases,
    prefixes."""
    count = draw(st.integers(0, 3))
    fields = ["location", "contact", "allow", "community"] + [
        f"{number}.{key}" for number in range(count)
        for key in ("name", "auth_passphrase", "privacy_passphrase")]
    bad = draw(st.sets(st.sampled_from(fields), max_size=2))

    def value(field, valid):
        return draw(poisoned(valid) if field in bad else valid)
    users = [{"name": f"u{number}-" + value(f"{number}.name", SNMP_NAMES)[:28],
              "auth": draw(st.sampled_from(["SHA-256", "SHA-384", "SHA-512"])),
              "auth_passphrase": "a" + value(f"{number}.auth_passphrase", PASSPHRASES),
              "privacy": "AES",
              "privacy_passphrase": "p" + value(f"{number}.privacy_passphrase", PASSPHRASES)}
             for number in range(count)]
    allow = [value("allow", st.sampled_from(["192.0.2.0/24", "10.0.0.0/8",
                                             "2001:db8::/32", "0.0.0.0/0"]))]
    document = {"snmp": {"enabled": True, "location": value("location", TEXTS).strip(" "),
                         "contact": value("contact", TEXTS).strip(" "), "allow": allow},
                "user": users}
    if draw(st.booleans()) or not users:
        document["community"] = {"name": value("community", PASSPHRASES)[:32],
                                 "allow": allow}
    return document


@EXAMPLES
@given(document=snmp_documents())
@example(document={"snmp": {"enabled": True, "location": 'Rack "4" \\ #x',
                            "contact": "a\nrwcommunity public", "allow": ["192.0.2.0/24"]},
                   "user": [{"name": "noc", "auth": "SHA-256",
                             "auth_passphrase": 'x" rwuser evil "y12',
                             "privacy": "AES", "privacy_passphrase": "priv-phrase"}]})
def test_snmpd_conf_holds_exactly_the_agent_the_check_accepted(document):
    """snmpd.conf read back by net-snmp's own rules (copy_nword, the rest-of-line
    tokens): exactly the directives meant - the users with their passphrases, the
    community from its prefixes, the view, TUSK-MIB's responder - and nothing else."""
    from snmp.core import config as snmp_config
    from snmp.core import render as snmp_render
    try:
        # as the applier checks it: a secret left out is taken from the configuration in
        # force - none here, so it is refused
        config = snmp_config.fill(snmp_config.from_document(document), None)
    except snmp_config.SnmpError:
        event("refused by the check")
        return
    event("accepted")
    program = ["/usr/bin/python3", "/usr/lib/tusk/webui/bin/tusk-snmp-pass"]
    text = snmp_render.render(config, program, "/run/tusk/snmp/counters.json")
    snmp = document["snmp"]
    view = ["tusk", "included"]
    expected = [("agentAddress", ["udp:161,udp6:161"]), ("dontLogTCPWrappersConnects", ["yes"])]
    expected += [(token, snmp[key]) for token, key in (("sysLocation", "location"),
                                                       ("sysContact", "contact")) if snmp[key]]
    expected += [("view", [*view, oid]) for oid in (".1.3.6.1.2.1", ".1.3.6.1.4.1.2021",
                                                    snmp_render.TUSK_MIB)]
    for user in document["user"]:
        expected += [("createUser", [user["name"], user["auth"], user["auth_passphrase"],
                                     "AES", user["privacy_passphrase"]]),
                     ("rouser", ["-s", "usm", user["name"], "priv", "-V", "tusk"])]
    for prefix in document.get("community", {}).get("allow", []):
        net = ipaddress.ip_network(prefix)
        expected.append(("rocommunity" if net.version == 4 else "rocommunity6",
                         [document["community"]["name"], str(net), "-V", "tusk"]))
    expected.append(("pass_persist", [snmp_render.TUSK_MIB, *program,
                                      "/run/tusk/snmp/counters.json"]))
    assert snmpd_conf(text) == expected
