"""Suricata in the loop (issue 38): the real IDS sniffs the firewall's inside port, a
signature matches a datagram, and the hook docs/API.md gives operators
(docs/examples/tusk-eve-hook: Suricata's EVE log through jq to curl) blocks that
connection through the API with an operate token - over HTTP to a live server, the
agent adding the entry to the kernel's set - so the next datagrams of that connection
are dropped while another connection goes on.

Debian bookworm packages no Suricata; trixie does, and the VM tier's root filesystem
(tools/build-vm-rootfs, a plain directory) has it: Suricata runs from that tree on this
host's kernel under bubblewrap, in the firewall's namespace."""
import os
import signal
import subprocess
import time

import pytest
from kit import wait_until
from test_ids_hook import udp  # noqa: F401  (the fixture: listeners on peer-b)
from tuskweb import PEER_A, PEER_B

from accounts import tokens
from accounts.models import AuditEntry
from flows.models import HookEntry
from lab.builds import cached_build
from lab.paths import ROOT

SID = 9000001
RULE = (f'alert udp any any -> any 7001 (msg:"TUSK TEST exfiltration"; '
        f'content:"TUSK-IDS-TEST"; sid:{SID}; rev:1;)')
HOOK = ROOT / "docs" / "examples" / "tusk-eve-hook"


@pytest.fixture(scope="module")
def trixie():
    """The VM tier's trixie root filesystem, with Suricata."""
    root = cached_build([str(ROOT / "tools" / "build-vm-rootfs")],
                        "the guest's root filesystem")
    assert (root / "usr" / "bin" / "suricata").exists(), f"{root} has no Suricata"
    return root


def _group(argv, log, **kwargs):
    return subprocess.Popen(argv, stdout=open(log, "ab"), stderr=subprocess.STDOUT,
                            start_new_session=True, **kwargs)


def _stop(process):
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture
def suricata(trixie, netns, tmp_path):
    """Suricata 7 on the firewall namespace's eth1 (towards peer-a), its logs in
    tmp_path/suricata. -> that directory, once the engine runs."""
    logs, rules = tmp_path / "suricata", tmp_path / "rules"
    logs.mkdir()
    rules.mkdir()
    (rules / "tusk.rules").write_text(RULE + "\n")
    argv = ["ip", "netns", "exec", netns, "bwrap", "--die-with-parent",
            "--ro-bind", str(trixie), "/", "--proc", "/proc", "--dev", "/dev",
            "--ro-bind", "/sys", "/sys", "--tmpfs", "/run", "--tmpfs", "/tmp",
            "--bind", str(logs), "/out",
            "--ro-bind", str(rules), "/tusk",
            # -k none: veth hands over packets with checksums still to be filled in
            "suricata", "-c", "/etc/suricata/suricata.yaml", "-S", "/tusk/tusk.rules",
            "--pcap=eth1", "-l", "/out", "-k", "none"]
    process = _group(argv, tmp_path / "suricata.out")

    def running():
        assert process.poll() is None, (tmp_path / "suricata.out").read_text()[-3000:]
        log = logs / "suricata.log"
        return log.exists() and "Engine started" in log.read_text(errors="replace")
    try:
        wait_until(running, 90, "Suricata's engine to start")
        yield logs
    finally:
        _stop(process)


def test_a_suricata_alert_blocks_that_connection_through_the_api(
        agent, netns, udp, suricata, live_server, admin_user, tmp_path):  # noqa: F811
    token_file = tmp_path / "ids.token"
    token_file.write_text(tokens.create("suricata", "operate", admin_user, 1)[1] + "\n")
    token_file.chmod(0o600)
    hook = _group([str(HOOK)], tmp_path / "hook.out", env={
        **os.environ, "TUSK_URL": live_server.url, "SIDS": str(SID),
        "TUSK_TOKEN_FILE": str(token_file), "EVE": str(suricata / "eve.json"), "TTL": "600"})
    try:
        time.sleep(1)                          # tail follows the log from its end
        assert udp.arrives(40011, 7001)        # a benign connection goes through
        # the signature's payload: it gets through (the IDS sees it as it passes) ...
        assert udp.arrives(40010, 7001, payload=b"... TUSK-IDS-TEST ...")
        wait_until(lambda: HookEntry.objects.filter(action="block").exists(), 60,
                   "the hook's block to arrive through the API "
                   f"(hook: {(tmp_path / 'hook.out').read_text()})")
        entry = HookEntry.objects.get(action="block")
        assert entry.reason == f"suricata {SID}: TUSK TEST exfiltration"
        wait_until(lambda: entry_in_force(netns), 30, "the agent to add the block")
        # ... and then that connection is cut, whatever it carries; another goes on
        assert not udp.arrives(40010, 7001)
        assert udp.arrives(40011, 7001)
        assert AuditEntry.objects.filter(action="flow block", token="suricata").exists()
        alerts = (suricata / "eve.json").read_text()
        assert f'"signature_id":{SID}' in alerts and PEER_A in alerts and PEER_B in alerts
    finally:
        _stop(hook)


def entry_in_force(netns):
    listing = subprocess.run(["ip", "netns", "exec", netns, "nft", "list", "set", "inet",
                              "tusk_hook", "block_flow4"], capture_output=True, text=True)
    return "40010" in listing.stdout
