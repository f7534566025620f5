"""The shipped example policy live on Tusk's kernel (tests/vm/guest/scenarios/smoke.py):
applied and confirmed with the tusk CLI, ping both families, one iperf3 flow through
fw captured on both fw interfaces."""
import json

import seqcheck
from vm import ROOT

from lab.namespaces import CLIENT_V4, SERVER_V4
from policy.core import choices
from policy.core.normalise import load_policy_file

EXAMPLE_POLICY = ROOT / "webui" / "policy" / "examples" / "tusk.yaml"
MSS_ON_1500_BYTE_LINK = 1460


def test_example_policy_carries_a_flow_through_fw(scenario):
    folder = scenario("smoke")
    client = json.loads((folder / "iperf3-client.json").read_text())
    assert client["end"]["sum_received"]["bytes"] > 10_000_000
    for family in ("v4", "v6"):
        assert " 0% packet loss" in (folder / f"ping-{family}.txt").read_text(), family
    flows = seqcheck.flows(seqcheck.read(folder / "fw-veth-c.pcap"),
                           seqcheck.read(folder / "fw-veth-s.pcap"))
    data = max(flows.values(), key=lambda f: sum(s.length for s in f.inside))
    # the example's bulk-copy class leaves MSS and sequence numbers alone
    assert data.offsets() == (0, 0)
    syn_in, syn_out = data.handshake(data.inside, False), data.handshake(data.outside, False)
    assert syn_in.options == syn_out.options
    counters = json.loads((folder / "nft-counters.json").read_text())["nftables"]
    bulk = next(c["counter"] for c in counters
                if c.get("counter", {}).get("name") == "class_bulk-copy")
    assert bulk["packets"] >= 1


def test_smoke_flow_crossed_fw_whole_with_the_policys_mss(scenario):
    folder = scenario("smoke")
    captures = json.loads((folder / "captures.json").read_text())
    assert {name: c["dropped_by_kernel"] for name, c in captures.items()} == \
        {"fw-veth-c": 0, "fw-veth-s": 0}, "a capture is incomplete: it proves nothing"
    client = json.loads((folder / "iperf3-client.json").read_text())
    server = json.loads((folder / "iperf3-server.json").read_text())
    port = client["start"]["connected"][0]["local_port"]
    flows = seqcheck.flows(seqcheck.read(folder / "fw-veth-c.pcap"),
                           seqcheck.read(folder / "fw-veth-s.pcap"))
    data = flows[(CLIENT_V4, port), (SERVER_V4, 5201)]

    # fw forwards no more than it receives, and the server read nothing that did not
    # cross fw's server side (retransmissions count twice in a capture, once in iperf3)
    sent = {side: sum(s.length for s in getattr(data, side) if data.from_client(s))
            for side in ("inside", "outside")}
    received = server["end"]["sum_received"]["bytes"]
    assert 0 < received <= sent["outside"] <= sent["inside"], (received, sent)

    bulk = next(c for c in load_policy_file(EXAMPLE_POLICY).classes if c.name == "bulk-copy")
    assert bulk.mss.mode == choices.MSS_NONE, "this test expects bulk-copy to leave MSS alone"
    for synack in (False, True):
        mss = [seqcheck.option_value(data.handshake(getattr(data, side), synack).options,
                                     seqcheck.MSS) for side in ("inside", "outside")]
        assert [int.from_bytes(m, "big") for m in mss] == [MSS_ON_1500_BYTE_LINK] * 2, synack


def test_smoke_counters_and_conntrack_saw_exactly_the_traffic(scenario):
    folder = scenario("smoke")
    counters = {c["counter"]["name"]: c["counter"]["packets"]
                for c in json.loads((folder / "nft-counters.json").read_text())["nftables"]
                if "counter" in c}
    # Each class counts the first packet of its connections: iperf3's control and data
    # connections, one ping flow per family; nothing was invalid or denied.
    assert counters == {"invalid": 0, "default_deny": 0, "class_bulk-copy": 2,
                        "class_admin": 0, "class_diagnostics": 2, "class_inside-rest": 0}
    stats = (folder / "conntrack-S.txt").read_text()
    for line in stats.splitlines():
        fields = dict(item.split("=") for item in line.split()[1:])
        bad = {k: v for k, v in fields.items()
               if k in ("invalid", "insert_failed", "drop", "early_drop", "error") and v != "0"}
        assert not bad, f"conntrack -S in fw: {line}"
