"""The appliance's firewall at boot (appliance/boot.py, Applier.boot) against real
nftables in the lab's fw namespace: the last confirmed revision comes back, a revision
left pending counts as rolled back, a box without a confirmed policy forwards nothing
(also after its first apply rolls back), and table inet tusk_host lets only the
management interface reach the firewall itself."""
import json
import os
import subprocess
import sys
import time

import pytest

from lab import FW_C_V4, FW_S_V4, SERVER_V4
from tuskcli import ROOT, run_tusk

sys.path.insert(0, os.path.join(ROOT, "webui"))
from appliance import boot  # noqa: E402
from policy.core.applier import Applier  # noqa: E402

POLICY = """
version: 1
zones:
  - {name: inside, interfaces: [veth-c]}
  - {name: outside, interfaces: [veth-s]}
services:
  - {name: web, protocol: tcp, ports: [80]}
classes:
  - {name: web, from: inside, to: outside, services: [web], action: accept}
"""


@pytest.fixture
def state(lab, tmp_path):
    lab.ns(lab.fw, "nft", "flush", "ruleset")
    directory = tmp_path / "policy"
    directory.mkdir()
    yield directory
    if (directory / "pending.json").exists():
        run_tusk("rollback", netns=lab.fw, state_dir=directory, check=False)
    lab.ns(lab.fw, "nft", "flush", "ruleset")


def tusk(lab, state, *args):
    return run_tusk(*args, netns=lab.fw, state_dir=state, check=True)


def ruleset(lab):
    return lab.ns(lab.fw, "nft", "list", "ruleset").stdout


def forwards(lab):
    """Does a ping from client reach server through fw?"""
    return lab.ns(lab.client, "ping", "-c", "1", "-W", "1", SERVER_V4, check=False).returncode == 0


def test_boot_loads_the_last_confirmed_revision_and_drops_a_pending_one(lab, state, tmp_path):
    (tmp_path / "p.yaml").write_text(POLICY)
    tusk(lab, state, "apply", tmp_path / "p.yaml", "--timeout", "600")
    tusk(lab, state, "confirm")
    (tmp_path / "q.yaml").write_text(POLICY.replace("name: web, from", "name: other, from"))
    tusk(lab, state, "apply", tmp_path / "q.yaml", "--timeout", "600")
    lab.ns(lab.fw, "nft", "flush", "ruleset")            # a reboot: the kernel forgot it all
    revision = Applier(str(state), netns=lab.fw).boot()
    assert revision.id == 1
    live = ruleset(lab)
    assert "classes[0] web" in live and "classes[0] other" not in live
    assert not (state / "pending.json").exists()
    meta = json.loads((state / "revisions" / "000002" / "meta.json").read_text())
    assert meta["outcome"] == "rolled back: the firewall restarted before it was confirmed"


def test_no_confirmed_policy_fails_closed_even_after_a_first_rollback(lab, state, tmp_path):
    assert forwards(lab)                                  # nothing loaded: the lab forwards
    (state / "failsafe.nft").write_text(boot.FAILSAFE)
    assert Applier(str(state), netns=lab.fw).boot() is None
    assert "fail closed" in ruleset(lab) and not forwards(lab)
    # the first apply on a new box, rolled back: back to the fail-closed table, not open
    (tmp_path / "p.yaml").write_text(POLICY.replace("protocol: tcp, ports: [80]",
                                                    "protocol: icmp"))
    tusk(lab, state, "apply", tmp_path / "p.yaml", "--timeout", "600")
    assert forwards(lab)
    tusk(lab, state, "rollback")
    assert "fail closed" in ruleset(lab) and not forwards(lab)


def test_a_refused_revision_leaves_the_fail_closed_table(lab, state, tmp_path):
    (tmp_path / "p.yaml").write_text(POLICY)
    tusk(lab, state, "apply", tmp_path / "p.yaml", "--timeout", "600")
    tusk(lab, state, "confirm")
    # the kernel refuses it at the next boot (here: an interface-less typo in the file)
    stored = state / "revisions" / "000001" / "ruleset.nft"
    stored.write_text(stored.read_text().replace("policy drop;", "policy dropp;", 1))
    lab.ns(lab.fw, "nft", "flush", "ruleset")
    with pytest.raises(Exception) as error:
        Applier(str(state), netns=lab.fw).boot()
    assert "loading revision 1 failed" in str(error.value)
    assert "table inet tusk" not in ruleset(lab)      # one transaction: nothing half-loaded
    lab.ns(lab.fw, "nft", "-f", "-", input=boot.FAILSAFE)
    assert not forwards(lab)


def listen(lab, port):
    return subprocess.Popen(["ip", "netns", "exec", lab.fw, sys.executable, "-c",
                             "import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,"
                             "socket.SO_REUSEADDR,1); s.bind(('0.0.0.0', int(sys.argv[1]))); "
                             "s.listen(8)\nwhile True: s.accept()[0].close()", str(port)])


def reaches(lab, namespace, address, port):
    code = ("import socket,sys; s=socket.socket(); s.settimeout(1.5); "
            "sys.exit(s.connect_ex((sys.argv[1], int(sys.argv[2]))))")
    return lab.ns(namespace, sys.executable, "-c", code, address, str(port),
                  check=False).returncode == 0


@pytest.mark.parametrize("mgmt", ["veth-c", None])
def test_host_table_lets_only_the_management_interface_in(lab, state, nft_check, mgmt):
    text = boot.host_ruleset(mgmt)
    assert nft_check(text).returncode == 0
    server = listen(lab, 443)
    try:
        time.sleep(0.5)
        lab.ns(lab.fw, "nft", "-f", "-", input=text)
        assert reaches(lab, lab.client, FW_C_V4, 443)
        assert reaches(lab, lab.server, FW_S_V4, 443) == (mgmt is None)
        assert not reaches(lab, lab.client, FW_C_V4, 8009)    # not a management port
        counters = ruleset(lab)
        assert "not for the firewall itself" in counters
    finally:
        server.kill()
        server.wait()
