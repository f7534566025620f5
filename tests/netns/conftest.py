"""Fixtures of the namespace tier: the firewall policy applied with the CLI, and an
echo server in the lab's server namespace."""
import textwrap

import pytest
from pcaps import EchoServer
from tuskcli import run_tusk

ZONES = """\
version: 1
zones:
  - {name: inside, interfaces: [veth-c]}
  - {name: outside, interfaces: [veth-s]}
"""
SERVER_PORTS = (5201, 5202, 5203, 5204, 5205)


@pytest.fixture(scope="module")
def server_echo(lab):
    server = EchoServer(lab.server, SERVER_PORTS)
    yield server
    server.close()


@pytest.fixture
def fw(lab, tmp_path):
    """apply(policy_yaml): the policy (zones prepended) applied and confirmed with the CLI."""
    lab.ns(lab.fw, "nft", "delete", "table", "inet", "tusk", check=False)
    state = tmp_path / "state"
    applied = []

    def apply(body):
        path = tmp_path / f"policy{len(applied) + 1}.yaml"
        path.write_text(ZONES + textwrap.dedent(body))
        run_tusk("apply", path, "--timeout", 600, netns=lab.fw, state_dir=state, check=True)
        run_tusk("confirm", netns=lab.fw, state_dir=state, check=True)
        applied.append(path)
    yield apply
    if (state / "pending.json").exists():
        run_tusk("rollback", netns=lab.fw, state_dir=state)
    lab.ns(lab.fw, "nft", "delete", "table", "inet", "tusk", check=False)
