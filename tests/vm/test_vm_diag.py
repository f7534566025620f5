"""The health report on captures taken on Tusk's kernel in the VM: a window-limited
flow (diag-window: 40 ms RTT through netem, the server without window scaling), and
the seqrand-sack captures - 1 % netem loss through a class whose sequence numbers
are randomised with SACK rewritten - where the report must find the loss and the
offsets and must not call the (translated) SACK blocks broken."""
import json
import re

import pytest

from diag.core.analyze import analyze


def flows_by_port(folder):
    """The report's flows by client (address, port): seqrand-sack has IPv4 and IPv6
    connections, which may share a client port."""
    report = analyze([folder / "fw-inside.pcap", folder / "fw-outside.pcap"])
    assert [f["error"] for f in report["files"]] == [None, None]
    found = {}
    for flow in report["flows"]:
        address, port = flow["client"].rsplit(":", 1)
        found[(address.strip("[]"), int(port))] = flow
    return found


def client_port(folder, run):
    """The client (address, port) of an iperf3 run's data connection."""
    data = json.loads((folder / f"{run}-client.json").read_text())
    connected = data["start"]["connected"][0]
    return connected["local_host"], connected["local_port"]


def test_a_window_limited_flow_is_diagnosed_as_such(scenario):
    folder = scenario("diag-window")
    flow = flows_by_port(folder)[client_port(folder, "window")]
    assert [p["interface"] for p in flow["points"]] == ["fw-inside.pcap", "fw-outside.pcap"]
    assert flow["handshake"]["server"]["wscale"] is None
    rtt = flow["handshake"]["rtt_ms"]
    # netem's 2 x 20 ms, plus what emulation adds: TCG beside the appliance session's
    # boots on two cores added up to 43 ms (a cold make test: 82.9 ms)
    assert 40 <= rtt < 120
    verdict = flow["verdict"]
    assert verdict["kind"] == "window-limited", flow["findings"]
    assert re.match(r"window-limited: server window 64 KiB at [\d.]+ ms caps this flow at ",
                    verdict["text"]), verdict["text"]
    assert verdict["text"].endswith("the server does not use window scaling")
    c2s = flow["directions"]["c2s"]
    assert c2s["window_limit_bps"] == pytest.approx(65535 * 8 / (c2s["rtt_full_ms"] / 1000),
                                                    rel=1e-3)   # the report rounds to µs
    assert 65535 * 8 / 0.120 < c2s["window_limit_bps"] <= 65535 * 8 / 0.040
    assert c2s["throughput_bps"] <= 1.1 * c2s["window_limit_bps"]


@pytest.mark.parametrize("run, sender", [("upload", "c2s"), ("download", "s2c")])
def test_loss_and_rewritten_sack_through_sequence_randomisation(scenario, run, sender):
    folder = scenario("seqrand-sack")
    flow = flows_by_port(folder)[client_port(folder, run)]
    kinds = {f["kind"] for f in flow["findings"]}
    d = flow["directions"][sender]
    assert d["retransmissions"]["needed"] > 0 and "loss" in kinds, flow["findings"]
    assert d["sack"]["blocks"] >= 20 and d["sack"]["outside"] == 0
    assert "sack-outside" not in kinds
    offsets = {c["direction"] for c in flow["firewall"]["changes"] if c["kind"] == "seq-offset"}
    assert offsets == {"c2s", "s2c"}     # class rand-both: both directions randomised
