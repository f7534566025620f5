"""The network's commit-confirm in the lab's fw namespace, through tusk-net and the
applier (network/core/applier.py on tusklib/commit.py) with real processes: a change
confirmed stays; one left unconfirmed goes back to the confirmed configuration by itself
- links, addresses and routes exactly as before - also when the process that applied it
is killed with SIGKILL. Same lab as test_network_apply.py, a prefix of its own."""
import os
import signal
import subprocess
import sys

import pytest
from kit import wait_until
from test_network_apply import A, B, NetLab, ping, state

from lab.paths import ROOT
from network.core import normalise
from network.core.iproute2 import IprouteBackend
from tusklib.target import Target

PREFIX = f"nwc{os.getpid() % 100000}"
TUSK_NET = ROOT / "webui" / "bin" / "tusk-net"
TIMEOUT = 30    # the shortest confirm timeout the applier takes


@pytest.fixture(scope="module")
def net():
    lab = NetLab(PREFIX)
    lab.down()
    yield lab.up()
    lab.down()


@pytest.fixture
def box(net, tmp_path):
    """fw with A applied and confirmed by tusk-net; yields a function running tusk-net on
    it, and the state of A."""
    store = tmp_path / "network"
    store.mkdir()
    (store / "network.toml").write_text(A)

    def tusk_net(*args):
        return subprocess.run([sys.executable, TUSK_NET, "--netns", net.fw, "--state-dir",
                               store, *map(str, args)], capture_output=True, text=True)
    result = tusk_net("apply")
    assert result.returncode == 0, result.stderr
    (tmp_path / "b.toml").write_text(B)
    backend = IprouteBackend(Target(net.fw), str(tmp_path / "system"))
    yield tusk_net, store, backend, state(backend)
    tusk_net("cancel")


def test_a_confirmed_change_stays(net, box, tmp_path):
    tusk_net, store, backend, before = box
    result = tusk_net("try", tmp_path / "b.toml", "--timeout", TIMEOUT)
    assert result.returncode == 0, result.stderr
    assert ping(net, net.fw, "10.30.0.1")
    assert tusk_net("confirm").stdout == "revision 2 confirmed\n"
    assert normalise.load(store / "network.toml") == normalise.parse(B)
    after = state(backend)
    assert after != before
    assert "revision 2" not in tusk_net("status").stdout   # nothing pending
    assert tusk_net("recover").stdout == "nothing pending\n"
    assert state(backend) == after


def test_an_unconfirmed_change_goes_back_by_itself(net, box, tmp_path):
    tusk_net, store, backend, before = box
    assert tusk_net("try", tmp_path / "b.toml", "--timeout", TIMEOUT).returncode == 0
    assert state(backend) != before and ping(net, net.fw, "10.30.0.1")
    wait_until(lambda: state(backend) == before, TIMEOUT + 15,
               "A's links, addresses and routes back after the deadline")
    assert not ping(net, net.fw, "10.30.0.1")
    assert normalise.load(store / "network.toml") == normalise.parse(A)
    assert "rolled back: not confirmed within 30 s" in \
        (store / "revisions" / "000002" / "meta.json").read_text()


def test_sigkill_of_the_applying_process_does_not_keep_the_change(net, box, tmp_path):
    tusk_net, store, backend, before = box
    script = ("import sys, time\n"
              "from network.core.applier import NetworkApplier\n"
              f"NetworkApplier({str(store)!r}, {net.fw!r}).apply(open(sys.argv[1]).read(), "
              f"timeout={TIMEOUT})\n"
              "print('applied', flush=True)\n"
              "time.sleep(600)\n")
    applier = subprocess.Popen([sys.executable, "-c", script, tmp_path / "b.toml"],
                               stdout=subprocess.PIPE, text=True,
                               env=dict(os.environ, PYTHONPATH=str(ROOT / "webui")))
    try:
        assert applier.stdout.readline() == "applied\n"
        assert state(backend) != before
        applier.send_signal(signal.SIGKILL)
        applier.wait(10)
    finally:
        applier.kill()
        applier.stdout.close()
    wait_until(lambda: state(backend) == before, TIMEOUT + 15,
               "A back after the deadline, with the applier killed")
    assert not ping(net, net.fw, "10.30.0.1")
