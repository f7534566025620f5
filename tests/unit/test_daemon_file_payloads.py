"""The payloads of issue 34, each against every door to a root daemon's file: the check
the form and the agent share must refuse it naming the field, and - should a model ever
be built past that check - the renderer must refuse it too, at its format's one quoting
point (tusklib/formats), never paste it. The property tests
(tests/property/test_daemon_files_property.py) go wider; these are the known attacks.

- rsyslog: a receiver `::1%"port="1")}` newline `module(load="omprog")`: Python's
  ipaddress took the scope, the forwarder pasted it into target="...", rsyslogd -N1 took
  the result, and omprog ran a command as root.
- networkd/resolved/timesyncd: a DNS server `2001:db8::53%` newline `[Resolve]` newline
  `DNSStubListenerExtra=0.0.0.0` went into the resolved drop-in as a section of its own;
  NTP servers and a route's Gateway= the same way.
- keepalived/conntrackd and the host table: the same scope in the peer's address, and
  interface names conntrackd's lexer reads as another token."""
import dataclasses

import pytest

from ha.core import config as ha_config
from ha.core import render as ha_render
from logs.core import forwarder
from logs.core import settings as log_settings
from network.core import networkd
from network.core import normalise as network_normalise
from network.core.errors import NetworkError
from policy.core import render_boot
from tusklib import values
from tusklib.formats import FormatRefused, conntrackd, keepalived, nft, rsyslog, systemd

RSYSLOG = '::1%"port="1")}\nmodule(load="omprog")\ninput(type="imfile" file="\\57tmp\\57x")'
RESOLVED = "2001:db8::53%\n[Resolve]\nDNSStubListenerExtra=0.0.0.0"
PAYLOADS = [RSYSLOG, RESOLVED, "fe80::1%eth0", "192.0.2.1\n", "192.0.2.1 ", "192.0.2.1\x00",
            "2001:db8::1%", "2001:db8::1%%", '2001:db8::1%"', "2001:db8::1%\u2028x",
            "192.0.2.1#x", "192.0.2.1;x", "1.2.3.4\\057", "::1%2F..%2Fetc"]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_syslog_receiver_carrying_a_payload_is_refused_by_field(payload):
    with pytest.raises(log_settings.SettingsError) as refused:
        log_settings.check({"syslog": [{"host": payload, "port": 514, "transport": "udp"}]})
    assert [p.path for p in refused.value.problems] == ["syslog[0].host"]


NETWORK = {"system": {"hostname": "tusk", "dns": ["192.0.2.53"], "ntp": ["0.pool.ntp.org"],
                      "timezone": "UTC"},
           "interfaces": [{"name": "eth1", "role": "management", "addresses": ["192.0.2.1/24"]},
                          {"name": "eth2", "role": "traffic", "addresses": ["10.1.0.1/24"]}],
           "routes": [{"destination": "10.20.0.0/16", "gateway": "10.1.0.254"}]}


def network_with(path, value):
    document = {**NETWORK, "system": dict(NETWORK["system"]),
                "routes": [dict(NETWORK["routes"][0])]}
    section, key = path
    if section == "system":
        document["system"][key] = [value] if key in ("dns", "ntp") else value
    else:
        document["routes"][0][key] = value
    return document


@pytest.mark.parametrize("field", [("system", "dns"), ("system", "ntp"), ("routes", "gateway"),
                                   ("system", "hostname"), ("system", "timezone"),
                                   ("routes", "destination")])
@pytest.mark.parametrize("payload", PAYLOADS + ["tusk\n", "10.20.0.0/16\n[Network]"])
def test_a_network_value_carrying_a_payload_is_refused_by_field(field, payload):
    with pytest.raises(NetworkError) as refused:
        network_normalise.from_document(network_with(field, payload))
    paths = {p.path for p in refused.value.problems}
    name = f"system.{field[1]}" if field[0] == "system" else f"routes[0].{field[1]}"
    assert name in paths or f"{name}[0]" in paths, refused.value


@pytest.mark.parametrize("gateway", ["fe80::1%\n[Network]\nAddress=0.0.0.0/0", "fe80::1%eth2",
                                     "fe80::1%\n[Network]\nDNS=192.0.2.66",
                                     "fe80::1%", "fe80::1\n"])
def test_a_link_local_gateway_carrying_a_payload_is_refused_by_field(gateway):
    document = {**NETWORK, "interfaces": [
        NETWORK["interfaces"][0], {"name": "eth2", "role": "traffic",
                                   "addresses": ["2001:db8:1::1/64"]}],
        "routes": [{"destination": "2001:db8:20::/48", "gateway": gateway,
                    "interface": "eth2"}]}
    with pytest.raises(NetworkError) as refused:
        network_normalise.from_document(document)
    assert "routes[0].gateway" in {p.path for p in refused.value.problems}, refused.value


HA = {"ha": {"enabled": True, "role": "primary", "vrid": 51, "advert_ms": 1000,
             "preempt": False, "sync_interface": "ens6", "sync_address": "192.168.255.1/30",
             "peer_address": "192.168.255.2"},
      "virtual": [{"interface": "ens4", "addresses": ["198.51.100.1/24"]}]}
HA6 = {"ha": {**HA["ha"], "sync_address": "fe80::1/64", "peer_address": "fe80::2"},
       "virtual": HA["virtual"]}


@pytest.mark.parametrize("payload", ["fe80::2%ens6", 'fe80::2%"', "fe80::2%\n}\nx",
                                     "fe80::2%ens6\n\tPath /tmp/x", "fe80::2 ", "::ffff:1.2.3.4"])
def test_a_peer_address_carrying_a_payload_is_refused_by_field(payload):
    document = {"ha": {**HA6["ha"], "peer_address": payload}, "virtual": HA["virtual"]}
    with pytest.raises(ha_config.HaError) as refused:
        ha_config.from_document(document)
    assert [p.path for p in refused.value.problems] == ["ha.peer_address"], refused.value


@pytest.mark.parametrize("name,why", [
    ("abc", "conntrackd cannot read 'abc' as a name: it is an address"),
    ("beef", "it is an address"), ("UDP", "it is its keyword UDP"),
    ("no", "it is its word for off"), ("nack", "the name of its mode ftfw"),
    ("eth@1", "more than one word"), ("1eth", "more than one word"),
])
def test_a_sync_interface_conntrackd_cannot_read_is_refused_before_anything_is_written(
        name, why):
    document = {"ha": {**HA["ha"], "sync_interface": name}, "virtual": HA["virtual"]}
    with pytest.raises(ha_config.HaError) as refused:
        ha_config.from_document(document)
    [problem] = refused.value.problems
    assert problem.path == "ha.sync_interface" and why in problem.message, problem


def test_a_segment_keepalived_would_read_as_a_conditional_is_refused():
    document = {"ha": HA["ha"], "virtual": [{"interface": "@x", "addresses": ["10.0.0.1/24"]}]}
    with pytest.raises(ha_config.HaError) as refused:
        ha_config.from_document(document)
    assert [p.path for p in refused.value.problems] == ["virtual[0].interface"]


# -- past the checks: the renderers refuse what their format cannot hold ----------------------

def test_the_forwarder_refuses_a_receiver_that_is_not_typed():
    checked = log_settings.check({"syslog": [{"host": "192.0.2.10"}]})
    forged = dataclasses.replace(checked.syslog[0], host=RSYSLOG)
    with pytest.raises(TypeError):
        forwarder.render(dataclasses.replace(checked, syslog=(forged,)), "/var/lib/tusk/logs",
                         "/var/lib/tusk/syslog")


@pytest.mark.parametrize("field,value", [("dns", (RESOLVED,)), ("ntp", ("ntp\n[Time]",)),
                                         ("hostname", "tusk\nx"), ("timezone", "UTC\n")])
def test_networkd_refuses_a_system_value_a_check_never_saw(field, value):
    config = network_normalise.from_document(NETWORK)
    forged = dataclasses.replace(config, system=dataclasses.replace(config.system,
                                                                    **{field: value}))
    with pytest.raises(NetworkError) as refused:
        networkd.render_system(forged)
    assert refused.value.path.startswith(f"system.{field}")


def test_networkd_refuses_a_gateway_a_check_never_saw():
    config = network_normalise.from_document(NETWORK)
    forged = dataclasses.replace(config, routes=(dataclasses.replace(
        config.routes[0], gateway="10.1.0.254%\n[Network]\nAddress=0.0.0.0/0"),))
    with pytest.raises((NetworkError, ValueError)):
        networkd.render_links(forged)


@pytest.mark.parametrize("field,value", [("peer_address", "fe80::2%ens6\n}"),
                                         ("sync_interface", "abc"),
                                         ("sync_interface", 'x"\n}')])
def test_the_ha_renderers_refuse_a_value_a_check_never_saw(field, value):
    forged = dataclasses.replace(ha_config.from_document(HA6), **{field: value})
    with pytest.raises((ha_render.RenderRefused, FormatRefused)):
        ha_render.conntrackd_conf(forged, "/run/tusk/ha")
    if field == "peer_address":
        with pytest.raises((values.Refused, FormatRefused)):
            render_boot.host("eth1", forged)


def test_a_segment_keepalived_cannot_hold_is_refused_by_the_renderer():
    config = ha_config.from_document(HA)
    forged = dataclasses.replace(config, virtual=(ha_config.Virtual(
        'ens4"\n}\nvrrp_script x {', ("198.51.100.1/24",)),))
    with pytest.raises(ha_render.RenderRefused):
        ha_render.keepalived_conf(forged, "/run/tusk/ha")


@pytest.mark.parametrize("quote", [rsyslog.string, systemd.word, keepalived.word,
                                   conntrackd.name, conntrackd.address, nft.interface])
def test_every_quoting_point_refuses_a_plain_string(quote):
    with pytest.raises(FormatRefused, match="only typed values|is not an"):
        quote("eth0")


def test_the_quoting_points_refuse_text_their_format_cannot_hold_even_when_typed():
    assert keepalived.word(values.InterfaceName("eth0.100")) == "eth0.100"
    with pytest.raises(FormatRefused):
        keepalived.word(values.InterfaceName("@eth0"))
    with pytest.raises(FormatRefused, match="its keyword Sync"):
        conntrackd.name(values.InterfaceName("Sync"))
    with pytest.raises(FormatRefused):
        conntrackd.address(values.IPAddress("::ffff:1.2.3.4"))
    assert systemd.unit("# x\n", [("Resolve", [("DNS", [values.IPAddress("2001:DB8::53")]),
                                                ("FallbackDNS", None)])]) == \
        "# x\n\n[Resolve]\nDNS=2001:db8::53\nFallbackDNS=\n"
