"""Shared fixtures. A missing tool fails the tier with what to install - never a skip."""
import os
import shutil
import signal
import subprocess

import pytest

from lab.namespaces import Lab
from lab.users import ensure_system_users

TOOLS = {"nft": "nftables", "ip": "iproute2", "tcpdump": "tcpdump", "iperf3": "iperf3",
         "ping": "iputils-ping"}


def require(*tools):
    missing = [f"{t} (Debian package {TOOLS[t]})" for t in tools if shutil.which(t) is None]
    if missing:
        pytest.fail("missing: " + ", ".join(missing) + " - run `make test`, which installs them")
    if os.geteuid() != 0:
        pytest.fail("this tier needs root to create network namespaces")


def pytest_sessionstart(session):
    """SIGTERM ends the session as Ctrl-C does: fixtures tear down what they started (the
    web tier's PostgreSQL cluster, the browser tier's lab), so nothing is left running."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)


@pytest.fixture(scope="session")
def scratch_netns():
    """An empty namespace in which nft -c asks the real kernel without touching the host."""
    require("nft", "ip")
    name = f"tusk-scratch-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    yield name
    subprocess.run(["ip", "netns", "del", name], check=False)


@pytest.fixture(scope="session")
def nft_check(scratch_netns):
    def check(ruleset):
        return subprocess.run(["ip", "netns", "exec", scratch_netns, "nft", "-c", "-f", "-"],
                              input=ruleset, capture_output=True, text=True)
    return check


@pytest.fixture(scope="module")
def lab():
    """client - fw - server, and the bypass link around fw (the self-test's direct path)."""
    require("nft", "ip", "tcpdump", "iperf3", "ping")
    lab = Lab(f"tt{os.getpid() % 100000}", bypass=True).up()
    yield lab
    lab.down()


@pytest.fixture(scope="session")
def system_users():
    """The image's users on this machine (tusk, tusk-nginx, tusk-analyze): tests that play
    the web user plant files and run commands as tusk."""
    if os.geteuid() != 0:
        pytest.fail("creating the image's system users needs root")
    ensure_system_users()
