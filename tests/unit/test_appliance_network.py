"""tusk-net and release 1's network.toml: the old file read into the model (every problem
named as that file names it, all at once), written atomically in the new format; NICs
found in a fake /sys; tusk-net as an operator runs it, against a --root tree whose host
programs are a recording script. The model's own checks: test_network_model.py; the
networkd files: golden/test_network_golden.py."""
import json
import os
import textwrap

import pytest
from appliancetree import Appliance, Nic, add_nics, ip_json

from appliance import network
from appliance.netcli import interface_addresses
from network.core.networkd import render_links
from tusklib.commands import Runner

PATH = "/etc/tusk/network.toml"

DESIGN_EXAMPLE = """\
[management]
interface = "enp0s2"     # default on first boot: the first Ethernet interface by name
address = "dhcp"         # or "192.168.1.1/24"
gateway = ""             # only with a static address
dns = []                 # only with a static address
[[traffic]]              # zero or more: interfaces that forward traffic
interface = "enp0s3"
address = ""             # "" = link up, no address; or "10.1.0.1/24"
"""

STATIC = """\
[management]
interface = "eno1"
address = "192.168.1.2/24"
gateway = "192.168.1.1"
dns = ["192.168.1.53", "2001:db8::53"]

[[traffic]]
interface = "enp3s0"
address = "10.1.0.1/24"

[[traffic]]
interface = "enp4s0"
address = "2001:db8:1::1/64"
"""


def toml(management="", *traffic):
    """A network.toml: [management] lines, then one [[traffic]] per argument."""
    text = "[management]\n" + textwrap.dedent(management)
    for entry in traffic:
        text += "\n[[traffic]]\n" + textwrap.dedent(entry)
    return text


def problems(text):
    with pytest.raises(network.NetworkError) as caught:
        network.parse(text, PATH)
    return [str(problem) for problem in caught.value.problems]


# -- release 1's file, read into the model ---------------------------------------------------

def test_the_release_1_design_example_reads_into_the_model():
    config = network.parse(DESIGN_EXAMPLE, PATH)
    assert config == network.NetworkConfig(interfaces=(
        network.Port("enp0s2", role="management", dhcp=True),
        network.Port("enp0s3", role="traffic")))


def test_a_release_1_static_file_keeps_its_gateway_and_dns():
    config = network.parse(STATIC, PATH)
    assert [(p.name, p.role, p.addresses) for p in config.interfaces] == [
        ("eno1", "management", ("192.168.1.2/24",)), ("enp3s0", "traffic", ("10.1.0.1/24",)),
        ("enp4s0", "traffic", ("2001:db8:1::1/64",))]
    assert config.routes == (network.Route("default", "192.168.1.1", 0, "eno1"),)
    assert config.system.dns == ("192.168.1.53", "2001:db8::53")
    assert network.parse(network.to_toml(config), PATH) == config


def test_addresses_are_rendered_in_their_canonical_form():
    config = network.parse(toml('interface = "eth0"\naddress = "2001:DB8:0::0:5/64"\n'
                                'gateway = "FE80::1"\n'), PATH)
    text = render_links(config)["/run/systemd/network/10-tusk-eth0.network"]
    assert "Address=2001:db8::5/64\n" in text
    assert "Gateway=fe80::1\n" in text


def test_a_dhcp_management_port_may_have_a_default_route_and_dns():
    """Release 1 refused these with DHCP; the routes and DNS are now the box's own."""
    config = network.parse(toml('interface = "eth0"\ngateway = "10.0.0.1"\n'
                                'dns = ["10.0.0.53"]\n'), PATH)
    assert (config.routes, config.system.dns) == (
        (network.Route("default", "10.0.0.1", 0, "eth0"),), ("10.0.0.53",))


# -- problems: each names the file, the section and key, and why ------------------------

M = "/etc/tusk/network.toml: [management]"
T1 = "/etc/tusk/network.toml: [[traffic]] #1"
T2 = "/etc/tusk/network.toml: [[traffic]] #2"

BAD = [
    ("not-toml", "[management\n", [
        "/etc/tusk/network.toml: not valid TOML at line 1, column 12: Expected ']' at the end "
        "of a table declaration"]),
    ("no-management", '[[traffic]]\ninterface = "eth1"\n', [
        "/etc/tusk/network.toml: [management]: missing (required: it names the interface "
        "the dashboard answers on)"]),
    ("management-not-a-table", 'management = "eth0"\n', [
        "/etc/tusk/network.toml: [management]: must be a table"]),
    ("unknown-section", toml('interface = "eth0"\n') + '[wan]\ninterface = "eth1"\n', [
        "/etc/tusk/network.toml: [wan]: unknown section (known: [management], [[traffic]])"]),
    ("unknown-key", toml('interface = "eth0"\nmtu = 9000\n'), [
        f"{M} mtu: unknown key (known: interface, address, gateway, dns)"]),
    ("missing-interface", toml('address = "dhcp"\n'), [f"{M} interface: missing (required)"]),
    ("wrong-type", toml('interface = "eth0"\naddress = 5\n'), [
        f"{M} address: expected a string, got an integer"]),
    ("dns-not-a-list", toml('interface = "eth0"\naddress = "10.0.0.2/24"\ndns = "1.1.1.1"\n'),
     [f"{M} dns: expected a list, got a string"]),
    ("dns-not-strings", toml('interface = "eth0"\naddress = "10.0.0.2/24"\ndns = [1]\n'), [
        f"{M} dns: expected a list of strings, got an integer in it"]),
    ("traffic-single-table", toml('interface = "eth0"\n') + '[traffic]\ninterface = "eth1"\n',
     ["/etc/tusk/network.toml: [[traffic]]: must be an array of tables, each written "
      "[[traffic]] (with two brackets)"]),
    ("traffic-unknown-key", toml('interface = "eth0"\n', 'interface = "eth1"\ngateway = ""\n'),
     [f"{T1} gateway: unknown key (known: interface, address)"]),
    ("traffic-no-interface", toml('interface = "eth0"\n', 'address = ""\n'),
     [f"{T1} interface: missing (required)"]),
    ("name-empty", toml('interface = ""\n'), [f"{M} interface: must not be empty"]),
    ("name-too-long", toml('interface = "enp0s20f0u1u2c23"\n'), [
        f"{M} interface: 'enp0s20f0u1u2c23' is 16 characters long; Linux allows at most 15"]),
    ("name-slash", toml('interface = "eth/0"\n'), [
        f"{M} interface: 'eth/0' contains '/', which Linux does not allow in an interface "
        "name"]),
    ("name-colon", toml('interface = "eth0:1"\n'), [
        f"{M} interface: 'eth0:1' contains ':', which Linux does not allow in an interface "
        "name"]),
    ("name-space", toml('interface = "eth 0"\n'), [
        f"{M} interface: 'eth 0' contains white space, which Linux does not allow in an "
        "interface name"]),
    ("name-dot", toml('interface = "."\n'), [
        f"{M} interface: '.' is not allowed as an interface name by Linux"]),
    ("name-dotdot", toml('interface = ".."\n'), [
        f"{M} interface: '..' is not allowed as an interface name by Linux"]),
    ("name-loopback", toml('interface = "lo"\n'), [
        "/etc/tusk/network.toml: [management] interface: the loopback interface cannot be "
        "configured"]),
    ("name-pattern", toml('interface = "eth*"\n'), [
        f"{M} interface: 'eth*' has characters other than letters, digits and _ . @ + - "
        "(the interface names policy zones accept)"]),
    ("traffic-is-management", toml('interface = "eth0"\n', 'interface = "eth0"\n'), [
        "/etc/tusk/network.toml: [[traffic]] #1 interface: 'eth0' is already configured as "
        "interfaces[0]"]),
    ("traffic-twice", toml('interface = "eth0"\n', 'interface = "eth1"\n',
                           'interface = "eth1"\n'), [
        "/etc/tusk/network.toml: [[traffic]] #2 interface: 'eth1' is already configured as "
        "interfaces[1]"]),
    ("management-empty-address", toml('interface = "eth0"\naddress = ""\n'), [
        "/etc/tusk/network.toml: [management] address: no management address left: give the "
        "management port an address, or turn on DHCP"]),
    ("traffic-dhcp", toml('interface = "eth0"\n', 'interface = "eth1"\naddress = "dhcp"\n'), [
        "/etc/tusk/network.toml: [[traffic]] #1 address: DHCPv4 is for the management port "
        "only: a traffic interface's address must not change under the policy and routes that "
        "rely on it; give it static addresses"]),
    ("no-prefix", toml('interface = "eth0"\naddress = "192.168.1.1"\n'), [
        f"{M} address: '192.168.1.1' has no prefix length; write it with one, e.g. "
        "192.168.1.1/24"]),
    ("no-prefix-v6", toml('interface = "eth0"\naddress = "2001:db8::1"\n'), [
        f"{M} address: '2001:db8::1' has no prefix length; write it with one, e.g. "
        "2001:db8::1/64"]),
    ("netmask", toml('interface = "eth0"\naddress = "10.0.0.1/255.255.255.0"\n'), [
        f"{M} address: '10.0.0.1/255.255.255.0': the prefix length '255.255.255.0' must be "
        "a number (e.g. /24)"]),
    ("not-an-address", toml('interface = "eth0"\naddress = "10.0.0.256/24"\n'), [
        f"{M} address: '10.0.0.256/24' is not an IPv4 or IPv6 address with a prefix length"]),
    ("prefix-too-long", toml('interface = "eth0"\naddress = "10.0.0.1/33"\n'), [
        f"{M} address: '10.0.0.1/33' is not an IPv4 or IPv6 address with a prefix length"]),
    ("network-address", toml('interface = "eth0"\naddress = "10.0.0.0/24"\n'), [
        f"{M} address: '10.0.0.0/24' is the network address of 10.0.0.0/24; give the "
        "interface's own address, e.g. 10.0.0.1/24"]),
    ("broadcast", toml('interface = "eth0"\naddress = "10.0.0.255/24"\n'), [
        f"{M} address: '10.0.0.255/24' is the broadcast address of 10.0.0.0/24; give the "
        "interface's own address, e.g. 10.0.0.1/24"]),
    ("v6-anycast", toml('interface = "eth0"\naddress = "2001:db8::/64"\n'), [
        f"{M} address: '2001:db8::/64' is the subnet-router anycast address of "
        "2001:db8::/64; give the interface's own address, e.g. 2001:db8::1/64"]),
    ("multicast", toml('interface = "eth0"\naddress = "224.0.0.5/24"\n'), [
        f"{M} address: '224.0.0.5/24' is a multicast address, not one an interface can "
        "have"]),
    ("loopback", toml('interface = "eth0"\naddress = "127.0.0.2/8"\n'), [
        f"{M} address: '127.0.0.2/8' is a loopback address, not one an interface can have"]),
    ("slash-zero", toml('interface = "eth0"\naddress = "10.0.0.1/0"\n'), [
        f"{M} address: '10.0.0.1/0': a /0 prefix is not a subnet"]),
    ("zone", toml('interface = "eth0"\naddress = "fe80::1%eth0/64"\n'), [
        f"{M} address: 'fe80::1%eth0/64' has a zone (%...); give the address without it"]),
    ("gateway-outside", toml('interface = "eth0"\naddress = "10.0.0.2/24"\n'
                             'gateway = "10.0.1.1"\n'), [
        "/etc/tusk/network.toml: [management] gateway: 10.0.1.1 is not reachable: it is in "
        "none of eth0's subnets (a gateway must be on a directly connected network)"]),
    ("gateway-family", toml('interface = "eth0"\naddress = "10.0.0.2/24"\n'
                            'gateway = "2001:db8::1"\n'), [
        "/etc/tusk/network.toml: [management] gateway: 2001:db8::1 is not reachable: it is in "
        "none of eth0's subnets (a gateway must be on a directly connected network)"]),
    ("gateway-own", toml('interface = "eth0"\naddress = "10.0.0.2/24"\n'
                         'gateway = "10.0.0.2"\n'), [
        "/etc/tusk/network.toml: [management] gateway: 10.0.0.2 is eth0's own address"]),
    ("gateway-network", toml('interface = "eth0"\naddress = "10.0.0.2/24"\n'
                             'gateway = "10.0.0.0"\n'), [
        f"{M} gateway: 10.0.0.0 is the network address of 10.0.0.0/24"]),
    ("gateway-prefix", toml('interface = "eth0"\naddress = "10.0.0.2/24"\n'
                            'gateway = "10.0.0.1/24"\n'), [
        f"{M} gateway: '10.0.0.1/24' is not an IP address (write it without a prefix length)"]),
    ("dns-bad", toml('interface = "eth0"\naddress = "10.0.0.2/24"\n'
                     'dns = ["10.0.0.53", "dns.example"]\n'), [
        f"{M} dns: 'dns.example' is not an IP address"]),
    ("dns-unspecified", toml('interface = "eth0"\naddress = "10.0.0.2/24"\n'
                             'dns = ["0.0.0.0"]\n'), [
        f"{M} dns: 0.0.0.0 is the unspecified address"]),
    ("overlap", toml('interface = "eth0"\naddress = "10.0.0.2/16"\n',
                     'interface = "eth1"\naddress = "10.0.5.1/24"\n'), [
        "/etc/tusk/network.toml: [[traffic]] #1 address: 10.0.5.1/24 overlaps 10.0.0.2/16 of "
        "eth0 (interfaces[0].addresses[0]): a subnet belongs to one interface"]),
    ("keys-before-values", toml('interface = "eth/0"\naddress = "10.0.0.0/24"\n'
                         'gateway = "10.9.9.9"\ndns = ["x"]\nmtu = 1\n',
                         'interface = "eth1"\naddress = "dhcp"\n'), [
        f"{M} mtu: unknown key (known: interface, address, gateway, dns)"]),
    ("all-values-at-once", toml('interface = "eth/0"\naddress = "10.0.0.0/24"\n'
                                'dns = ["x"]\n',
                                'interface = "eth1"\naddress = "dhcp"\n',
                                'interface = "eth1"\n'), [
        "/etc/tusk/network.toml: [management] dns: 'x' is not an IP address",
        "/etc/tusk/network.toml: [management] interface: 'eth/0' contains '/', which Linux does "
        "not allow in an interface name",
        "/etc/tusk/network.toml: [management] address: '10.0.0.0/24' is the network address of "
        "10.0.0.0/24; give the interface's own address, e.g. 10.0.0.1/24",
        "/etc/tusk/network.toml: [[traffic]] #1 address: DHCPv4 is for the management port only: "
        "a traffic interface's address must not change under the policy and routes that rely on "
        "it; give it static addresses",
        "/etc/tusk/network.toml: [[traffic]] #2 interface: 'eth1' is already configured as "
        "interfaces[1]"]),
]


@pytest.mark.parametrize("text, expected", [case[1:] for case in BAD],
                         ids=[case[0] for case in BAD])
def test_every_problem_names_the_file_the_key_and_why(text, expected):
    assert problems(text) == expected


def test_schema_problems_of_several_tables_come_together():
    text = toml('interface = "eth0"\nmtu = 1\n', 'address = ""\n', 'interface = 7\n')
    assert problems(text) == [
        f"{M} mtu: unknown key (known: interface, address, gateway, dns)",
        f"{T1} interface: missing (required)",
        f"{T2} interface: expected a string, got an integer"]


@pytest.mark.parametrize("address", ["10.0.0.1/24", "10.0.0.0/31", "10.0.0.1/31",
                                     "10.0.0.7/32", "2001:db8::1/64", "2001:db8::/127",
                                     "fe80::2/64", "192.168.1.254/24"])
def test_usable_addresses(address):
    config = network.parse(toml(f'interface = "eth0"\naddress = "{address}"\n'), PATH)
    assert config.management.addresses == (address,)


@pytest.mark.parametrize("address, gateway", [("10.0.0.2/24", "10.0.0.1"),
                                              ("10.0.0.2/24", "10.0.0.254"),
                                              ("2001:db8::2/64", "2001:db8::1"),
                                              ("2001:db8::2/64", "fe80::1")])
def test_usable_gateways(address, gateway):
    network.parse(toml(f'interface = "eth0"\naddress = "{address}"\n'
                       f'gateway = "{gateway}"\n'), PATH)


def test_interfaces_the_machine_lacks_are_problems_when_asked():
    config = network.parse(DESIGN_EXAMPLE, PATH)
    assert list(map(str, network.validate(config, present=["enp0s2", "enp0s4"]))) == [
        "interfaces[1].name: 'enp0s3': this machine has no such Ethernet port (it has: "
        "enp0s2, enp0s4)"]
    assert network.validate(config, present=["enp0s2", "enp0s3"]) == []


def test_load_names_a_missing_file(tmp_path):
    with pytest.raises(network.NetworkError) as caught:
        network.load(str(tmp_path / "network.toml"))
    assert list(map(str, caught.value.problems)) == [
        f"{tmp_path}/network.toml: does not exist (`tusk-net apply` creates it with the first "
        "Ethernet interface on DHCP)"]


# -- writing -------------------------------------------------------------------------------

def test_write_checks_first_and_replaces_the_file_whole(tmp_path):
    path = str(tmp_path / "etc" / "network.toml")
    good = network.parse(STATIC, PATH)
    network.write(good, path)
    assert network.load(path) == good
    assert os.listdir(tmp_path / "etc") == ["network.toml"]
    bad = network.NetworkConfig(interfaces=(network.Port("eth0", role="traffic",
                                                           dhcp=True),))
    with pytest.raises(network.NetworkError) as caught:
        network.write(bad, path)
    assert list(map(str, caught.value.problems))[0].startswith(
        "interfaces[0].dhcp: DHCPv4 is for the management port only")
    assert network.load(path) == good
    assert os.listdir(tmp_path / "etc") == ["network.toml"]


# -- the machine ----------------------------------------------------------------------------

MACHINE = [
    Nic("enp0s10", mac="52:54:00:00:00:0a", carrier="0", operstate="down", driver="e1000e"),
    Nic("enp0s2", mac="52:54:00:00:00:02"),
    Nic("enp0s3", mac="52:54:00:00:00:03", carrier=None, operstate="down"),
    Nic("lo", type="772", device=False, mac="00:00:00:00:00:00"),
    Nic("veth0", device=False),
    Nic("br0", device=False, extra=("bridge",)),
    Nic("wlp2s0", driver="iwlwifi", extra=("wireless", "phy80211"),
        uevent="DEVTYPE=wlan\nINTERFACE=wlp2s0"),
    Nic("wwan0", uevent="DEVTYPE=wwan\nINTERFACE=wwan0"),
    Nic("ib0", type="32", driver="mlx5_core"),
]


def test_detect_finds_the_physical_ethernet_interfaces_in_name_order(tmp_path):
    add_nics(str(tmp_path), *MACHINE)
    assert network.detect_interfaces(str(tmp_path / "sys/class/net")) == [
        network.Nic("enp0s2", "52:54:00:00:00:02", "up", "virtio_net"),
        network.Nic("enp0s3", "52:54:00:00:00:03", "down", "virtio_net"),
        network.Nic("enp0s10", "52:54:00:00:00:0a", "down", "e1000e"),
    ]


def test_default_config_is_the_first_ethernet_interface_on_dhcp(tmp_path):
    add_nics(str(tmp_path), *MACHINE)
    nics = network.detect_interfaces(str(tmp_path / "sys/class/net"))
    assert network.default_config(nics) == network.NetworkConfig(
        interfaces=(network.Port("enp0s2", role="management", dhcp=True),))
    assert network.default_config(["eth10", "eth9"]).management.name == "eth9"
    with pytest.raises(network.NetworkError) as caught:
        network.default_config(network.detect_interfaces(str(tmp_path / "nothing")))
    assert list(map(str, caught.value.problems)) == [
        "no Ethernet interface found: there is nothing to manage the box through (is the "
        "NIC's driver in the kernel?)"]


def test_addresses_of_a_real_interface_from_ip():
    """The real `ip -j` on this machine's loopback (link-local ones would be left out)."""
    assert "127.0.0.1" in interface_addresses(Runner(), "lo")


# -- tusk-net -------------------------------------------------------------------------------

@pytest.fixture
def box(tmp_path):
    return Appliance(tmp_path / "root", Nic("enp0s2"), Nic("enp0s3", mac="52:54:00:00:00:03"),
                     Nic("enp0s4", mac="52:54:00:00:00:04", carrier="0"), Nic("veth9",
                                                                             device=False))


def test_check_exit_codes(box):
    box.write(PATH, STATIC)
    result = box.tusk_net("check")
    assert (result.returncode, result.stdout, result.stderr) == (
        0, f"{box.path(PATH)}: valid (3 interfaces, 1 route)\n", "")
    bad = box.path("/tmp/bad.toml")
    box.write("/tmp/bad.toml", toml('interface = "eth/0"\naddress = "10.0.0.0/24"\n'))
    result = box.tusk_net("check", bad)
    assert (result.returncode, result.stdout) == (network.Code.VALUE, "")
    assert result.stderr.splitlines() == [
        f"error[VALUE]: {bad}: [management] interface: 'eth/0' contains '/', which Linux does "
        "not allow in an interface name",
        f"error[VALUE]: {bad}: [management] address: '10.0.0.0/24' is the network address of "
        "10.0.0.0/24; give the interface's own address, e.g. 10.0.0.1/24"]
    result = box.tusk_net("check", box.path("/nowhere.toml"))
    assert result.returncode == network.Code.IO
    assert "nowhere.toml: does not exist" in result.stderr


@pytest.mark.parametrize("args", [[], ["frobnicate"], ["check", "a", "b"]])
def test_usage_errors_exit_2(box, args):
    result = box.tusk_net(*args)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: tusk-net")


def test_a_bad_command_table_exits_2(box):
    result = box.tusk_net("show", env=box.env() | {"TUSK_COMMANDS": '{"reboot": ["x"]}'})
    assert (result.returncode, result.stderr) == (
        2, "tusk-net: TUSK_COMMANDS: 'reboot': unknown command (known: frr-reload, ip, "
           "manage, networkctl, nft, shell, systemctl, tusk-boot, tusk-install, tusk-net, "
           "vtysh)\n")


def test_apply_on_a_new_box_creates_the_default_and_its_file(box):
    box.write("/run/systemd/network/10-tusk-eth7.network", "stale")
    box.write("/run/systemd/network/20-other.network", "not ours")
    result = box.tusk_net("apply")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:4] == [
        f"created {box.path(PATH)}: the first Ethernet interface manages the box, on DHCP",
        "wrote /run/systemd/network/10-tusk-enp0s2.network",
        "removed /run/systemd/network/10-tusk-eth7.network",
        "systemd-networkd is not running: it reads these files when it starts"]
    assert network.load(box.path(PATH)) == network.NetworkConfig(
        interfaces=(network.Port("enp0s2", role="management", dhcp=True),))
    files = box.network_files()
    assert sorted(files) == ["10-tusk-enp0s2.network", "20-other.network"]
    assert "[Match]\nName=enp0s2\n" in files["10-tusk-enp0s2.network"]
    assert box.commands()[0] == ("systemctl", "is-active", "--quiet",
                                 "systemd-networkd.service")
    # it is the box's first confirmed revision; a second apply changes nothing
    assert box.tusk_net("status").stdout == "confirmed revision: 1\n"
    result = box.tusk_net("apply")
    assert result.stdout == "nothing to change: the machine is as configured\n"
    assert box.tusk_net("status").stdout == "confirmed revision: 1\n"


def test_apply_reloads_a_running_networkd_for_the_interfaces_present(box):
    box.write(PATH, toml('interface = "enp0s2"\naddress = "192.168.7.2/24"\n'
                         'gateway = "192.168.7.1"\n',
                         'interface = "enp0s3"\naddress = "10.1.0.1/24"\n',
                         'interface = "enp9s0"\n'))
    box.write("/run/systemd/network/10-tusk-enp0s4.network", "was traffic")
    box.behave({"systemctl is-active": {"rc": 0}})
    result = box.tusk_net("apply")
    assert result.returncode == 0, result.stderr
    assert result.stderr == (
        f"tusk-net: warning: {box.path(PATH)}: interfaces[2].name: 'enp9s0': this machine "
        "has no such Ethernet port now; its file is written for when it appears\n")
    assert sorted(box.network_files()) == ["10-tusk-enp0s2.network", "10-tusk-enp0s3.network",
                                          "10-tusk-enp9s0.network"]
    assert "Address=192.168.7.2/24\n" in box.network_files()["10-tusk-enp0s2.network"]
    assert box.commands()[:5] == [
        ("systemctl", "is-active", "--quiet", "systemd-networkd.service"),
        ("networkctl", "reload"),
        ("networkctl", "reconfigure", "enp0s2"),
        ("networkctl", "reconfigure", "enp0s3"),
        ("networkctl", "reconfigure", "enp0s4")]
    assert "systemd-networkd reloaded; reconfigured: enp0s2 enp0s3 enp0s4\n" in result.stdout


def test_apply_says_when_networkctl_fails(box):
    box.write(PATH, DESIGN_EXAMPLE.replace("enp0s2", "enp0s4"))
    box.behave({"systemctl is-active": {"rc": 0},
                "networkctl reload": {"rc": 1, "stderr": "Failed to reload: Access denied\n"}})
    result = box.tusk_net("apply")
    assert result.returncode == network.Code.APPLY
    assert result.stderr.endswith("Failed to reload: Access denied\n")
    assert "networkctl reload" in result.stderr


def test_apply_of_an_invalid_file_changes_nothing(box):
    box.write(PATH, toml('interface = "enp0s2"\n', 'interface = "enp0s2"\n'))
    box.write("/run/systemd/network/10-tusk-enp0s3.network", "kept")
    result = box.tusk_net("apply")
    assert (result.returncode, result.stdout, result.stderr) == (
        network.Code.VALUE, "", f"error[VALUE]: {box.path(PATH)}: [[traffic]] #1 interface: "
                                "'enp0s2' is already configured as interfaces[0]\n")
    assert box.network_files() == {"10-tusk-enp0s3.network": "kept"}
    assert box.commands() == []


def test_try_then_confirm_or_cancel_or_no_answer(box):
    """Commit-confirm from the command line, on the --root tree (the watchdog restores
    there too, never on this host)."""
    box.tusk_net("apply")
    first = box.network_files()
    static = box.read(PATH).replace("dhcp = true", "dhcp = false").replace(
        "addresses = []", 'addresses = ["10.0.0.1/24"]', 1)
    box.write("/tmp/static.toml", static)
    result = box.tusk_net("try", box.path("/tmp/static.toml"), "--timeout", "30")
    assert result.returncode == 0, result.stderr
    assert "Address=10.0.0.1/24" in box.network_files()["10-tusk-enp0s2.network"]
    assert box.tusk_net("status").stdout.startswith(
        "confirmed revision: 1\npending revision: 2 (")
    assert box.tusk_net("cancel").stdout == "revision 2: rolled back by root\n"
    assert box.network_files() == first
    assert box.tusk_net("try", box.path("/tmp/static.toml"), "--timeout", "30").returncode == 0
    assert box.tusk_net("confirm").stdout == "revision 3 confirmed\n"
    assert network.load(box.path(PATH)).management.addresses == ("10.0.0.1/24",)
    result = box.tusk_net("confirm")
    assert (result.returncode, result.stderr) == (
        network.Code.NOT_PENDING, "error[NOT_PENDING]: nothing awaits confirmation\n")


def test_mgmt_address_prints_the_addresses_one_a_line(box):
    box.write(PATH, DESIGN_EXAMPLE)
    box.behave({"ip": {"stdout": ip_json(("inet6", "2001:db8::5", 64, "global"),
                                         ("inet6", "fe80::5054:ff:fe12:3456", 64, "link"),
                                         ("inet", "192.168.1.5", 24, "global"))}})
    result = box.tusk_net("mgmt-address")
    assert (result.returncode, result.stdout, result.stderr) == (
        0, "192.168.1.5\n2001:db8::5\n", "")
    assert box.commands() == [("ip", "-j", "addr", "show", "dev", "enp0s2")]
    box.behave({"ip": {"rc": 1, "stderr": 'Device "enp0s2" does not exist.\n'}})
    result = box.tusk_net("mgmt-address")
    assert (result.returncode, result.stderr) == (
        1, "tusk-net: ip -j addr show dev enp0s2 failed (exit 1): Device \"enp0s2\" does not "
           "exist.\n")


def test_under_root_host_programs_run_only_when_the_table_names_them(box):
    box.write(PATH, DESIGN_EXAMPLE)
    env = box.env() | {"TUSK_COMMANDS": json.dumps({})}
    result = box.tusk_net("mgmt-address", env=env)
    assert (result.returncode, result.stderr) == (
        1, f"tusk-net: not running ip: under --root {box.root} only what TUSK_COMMANDS names "
           "runs\n")
    result = box.tusk_net("apply", env=env)
    assert result.returncode == 0
    assert "systemd-networkd.service not asked: not running systemctl: under --root " \
           f"{box.root} only what TUSK_COMMANDS names runs" in result.stdout


def test_show(box):
    result = box.tusk_net("show")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == [
        f"{box.path(PATH)}: missing; `tusk-net apply` creates it as:",
        "  management  enp0s2           DHCP",
        "  system      host tusk, DNS none, NTP none, time zone UTC",
        "Ethernet interfaces:",
        "  enp0s2           52:54:00:12:34:56  link up       virtio_net",
        "  enp0s3           52:54:00:00:00:03  link up       virtio_net",
        "  enp0s4           52:54:00:00:00:04  link down     virtio_net"]
    box.write(PATH, STATIC)
    assert box.tusk_net("show").stdout.splitlines()[:6] == [
        f"{box.path(PATH)}:",
        "  management  eno1             192.168.1.2/24",
        "  traffic     enp3s0           10.1.0.1/24",
        "  traffic     enp4s0           2001:db8:1::1/64",
        "  route       default via 192.168.1.1 dev eno1",
        "  system      host tusk, DNS 192.168.1.53, 2001:db8::53, NTP none, time zone UTC"]
