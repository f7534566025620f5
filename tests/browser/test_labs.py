"""Labs side by side, as `make run LAB=a` beside `make run LAB=b`: while the browser
tier's lab runs, a second tools/tusk-lab of another name comes up on ports of its own;
one that asks for a port the first holds, or takes the first's name, ends at once with
one line naming the port or the lab - no traceback - and leaves the first running.
Each lab's fw has a management port of its own, on a subnet of its own, where the
image's nginx answers."""
import ipaddress
import re
import subprocess
import sys
import tomllib
import urllib.request

import mgmt_lab
import pytest
from tuskweb import BROWSER_LAB

from lab.paths import TUSK_LAB
from lab.ports import running_labs


def healthy(url):
    with urllib.request.urlopen(url + "/healthz/", timeout=5) as response:
        return response.status == 200


def refused(*argv):
    """tusk-lab's exit status and its output's last line, for a start that must fail fast."""
    done = subprocess.run([sys.executable, str(TUSK_LAB), *argv], capture_output=True,
                          text=True, timeout=60)
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, lines[-1] if lines else ""


@pytest.mark.parametrize("key, offset, option, name", [
    ("http", 0, "--http-port", "HTTP"),
    ("http", 2, "--http-port", "HTTP"),          # the first's redirect listener, PORT+2
    ("postgresql", 0, "--pg-port", "PostgreSQL")])
def test_a_port_the_running_lab_holds_is_refused_in_one_line(tusk, key, offset, option, name):
    url, _ = tusk
    first = running_labs()[BROWSER_LAB]
    port = first[key] + offset
    status, last = refused("--name", f"{BROWSER_LAB}x", "--no-traffic", option, str(port))
    assert status == 1
    assert last.startswith(f"tusk-lab: {name} port {port} is taken by lab {BROWSER_LAB} "
                           f"(pid {first['pid']}): choose another"), last
    assert healthy(url)


def test_a_second_lab_of_the_same_name_is_refused_and_the_first_keeps_running(tusk):
    url, _ = tusk
    status, last = refused("--name", BROWSER_LAB, "--no-traffic")
    assert (status, last) == (1, f"tusk-lab: lab {BROWSER_LAB} is already running (pid "
                                 f"{running_labs()[BROWSER_LAB]['pid']}): stop it first, or "
                                 "start another with another name (make run LAB=...)")
    assert healthy(url)


def test_a_second_lab_comes_up_beside_the_first(tusk):
    url, _ = tusk
    second = subprocess.Popen([sys.executable, str(TUSK_LAB), "--name", f"{BROWSER_LAB}2",
                               "--no-traffic"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in second.stdout:
            lines.append(line)
            if line.startswith("READY "):
                break
        assert lines and lines[-1].startswith("READY "), "the second lab did not come up"
        other = lines[-1].split()[1].rstrip("/")
        assert other != url and healthy(other) and healthy(url)
        labs = running_labs()
        assert labs[f"{BROWSER_LAB}2"]["postgresql"] != labs[BROWSER_LAB]["postgresql"]
        # its management port: a subnet of its own, where its own nginx answers
        management = re.search(r"management address: https://([0-9.]+)/", "".join(lines))
        assert management, "".join(lines)
        address = management.group(1)
        assert address.split(".")[:3] != mgmt_lab.addresses()[0].split(".")[:3]
        assert mgmt_lab.answers(address) == 200
        assert mgmt_lab.answers(mgmt_lab.addresses()[0].split("/")[0]) == 200
    finally:
        second.terminate()
        second.communicate(timeout=120)
    assert f"{BROWSER_LAB}2" not in running_labs() and healthy(url)


def test_fw_has_a_management_port_where_the_images_nginx_answers(tusk):
    """The management port as tools/tusk-lab makes it: fw's mgmt and its peer here on the
    lab's subnet, nginx inside fw answering there (HTTPS; plain HTTP is sent to HTTPS,
    as on the box), and the confirmed network.toml saying so - fw's real state, which the
    Network page starts from."""
    lab = mgmt_lab.lab()
    (fw_address,) = mgmt_lab.addresses()
    assert mgmt_lab.addresses("") == [f"{lab.management_peer_address}/24"]
    assert ipaddress.ip_interface(fw_address).network == lab.management
    address = fw_address.split("/")[0]
    assert mgmt_lab.answers(address) == 200
    assert mgmt_lab.answers(address, "http") == 301
    config = tomllib.loads(mgmt_lab.NETWORK_TOML.read_text())
    ports = {port["name"]: port for port in config["interfaces"]}
    assert ports["mgmt"]["role"] == "management"
    assert ports["mgmt"]["addresses"] == [fw_address]
    assert {name: (port["role"], port["addresses"]) for name, port in ports.items()
            if name != "mgmt"} == {"veth-c": ("traffic", ["10.10.1.1/24", "fd00:10:1::1/64"]),
                                   "veth-s": ("traffic", ["10.10.2.1/24", "fd00:10:2::1/64"]),
                                   # the HA pair's links to fw2 (lab/hapeer.py)
                                   "sync0": ("traffic", ["192.168.255.1/30"]),
                                   "ha0": ("traffic", ["198.51.100.2/24"])}
    # the loopback listener stays as it was, in this namespace
    assert healthy(tusk[0])
