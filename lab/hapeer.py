"""The lab's second box of an HA pair (tools/tusk-lab): namespace <lab>-fw2 beside fw, a
sync link between them (sync0) and a segment both sit on (ha0), where the pair's virtual
address lives. fw2 runs what a box's agent runs for the pair - its half applied and
confirmed by the same HaApplier (real keepalived and conntrackd in fw2), the agents'
channel answering fw's agent with the same code (ha.agent_jobs.answer: its status,
and the policy steps of the configuration sync, loaded into fw2's own nftables) - but
no dashboard of its own: fw's HA page is where the lab's pair is configured.

    python3 -m lab.hapeer NETNS STATE_DIR KEY_FILE   (TUSK_CONFIG: the lab's tusk.toml)

Runs until SIGTERM, then stops fw2's daemons and rolls back a policy left pending.
fw2 also has links named veth-c and veth-s (a veth pair of its own), so the lab's
policy, whose zones name fw's ports, loads there too.
"""
import dataclasses
import os
import signal
import sys
import threading
from functools import partial

SYNC = ("192.168.255.1/30", "192.168.255.2/30")       # fw, fw2
SEGMENT = ("198.51.100.2/24", "198.51.100.3/24")
VIRTUAL = "198.51.100.1/24"
VRID, ADVERT_MS = 51, 1000


def half(role):
    """One box's half of the lab's pair, as the HA page's form takes it."""
    own, peer = (0, 1) if role == "primary" else (1, 0)
    return {"ha": {"enabled": True, "role": role, "vrid": VRID, "advert_ms": ADVERT_MS,
                   "preempt": False, "sync_interface": "sync0", "sync_address": SYNC[own],
                   "peer_address": SYNC[peer].split("/")[0]},
            "virtual": [{"interface": "ha0", "addresses": [VIRTUAL]}]}


def wire(topology, fw, fw2):
    """fw2's links: the sync link and the segment to fw, and its own veth-c/veth-s."""
    for link in ("sync0", "ha0"):
        topology.wire(fw, link, fw2, link)
    for index, box in enumerate((fw, fw2)):
        topology.address(box, "sync0", SYNC[index])
        topology.address(box, "ha0", SEGMENT[index])
    topology.ns(fw2, "ip", "link", "add", "veth-c", "type", "veth", "peer", "name", "veth-s")
    for link in ("veth-c", "veth-s"):
        topology.ns(fw2, "ip", "link", "set", link, "up")
    topology.forward(fw2)


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    netns, state_dir, key_file = argv
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tusk.settings")
    import django
    django.setup()
    from django.conf import settings

    from ha.agent_jobs import answer
    from ha.core import config as ha_config
    from ha.core import peer as peers
    from ha.core.applier import HaApplier
    from policy.core.applier import Applier as PolicyApplier
    config = dataclasses.replace(
        settings.TUSK, netns=netns, state_dir=os.path.join(state_dir, "policy"),
        network_state_dir=os.path.join(state_dir, "network"),
        tuning_state_dir=os.path.join(state_dir, "tuning"),
        ha_state_dir=os.path.join(state_dir, "ha"))
    applier = HaApplier(config.ha_state_dir, netns=netns)
    with open(key_file, encoding="utf-8") as handle:
        peers.write_key(config.ha_state_dir, handle.read().strip())
    applier.apply(ha_config.to_toml(ha_config.from_document(half("secondary"))),
                  user="tusk-lab", timeout=3600)
    applier.confirm(user="tusk-lab")
    server = peers.PeerServer(SYNC[1].split("/")[0], partial(answer, config, applier),
                              lambda: peers.read_key(config.ha_state_dir), netns=netns)
    print(f"HA peer {netns}: the secondary, answering on {SYNC[1]}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.stop()
    policy = PolicyApplier(config.state_dir, netns)
    if policy.store.pending():
        policy.cancel(user="tusk-lab")
    applier.daemons.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
