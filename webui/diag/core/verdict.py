"""Findings and the plain-language verdict of one flow.

Each finding is {"kind", "severity", "text"}; severities, worst first: problem,
warning, info, ok. The verdict is the worst finding, or "healthy" when nothing is
worse than info. Thresholds are named below so the texts and tests agree.
"""
from .flows import MASK, unwrap

SEVERITY = {"problem": 0, "warning": 1, "info": 2, "ok": 3}
WINDOW_LIMITED = 0.7     # achieved / (window / RTT) at or above this: window-limited
WINDOW_FULL = 0.3        # or this share of data segments sent into a full window
LOSS_WARNING = 0.001     # needed retransmissions per data segment
LOSS_PROBLEM = 0.01
REORDER_WARNING = 0.001
MIN_BYTES = 64 * 1024    # a direction with less data gets no throughput verdicts


def rate(bps):
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= scale:
            value = bps / scale
            return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return f"{bps:.0f} bit/s"


def size(count):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            value = count / scale
            return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return f"{count} bytes"


def ms(value):
    return f"{value:.3g} ms" if value < 100 else f"{value:.0f} ms"


def _finding(kind, severity, text, **extra):
    return {"kind": kind, "severity": severity, "text": text, **extra}


def findings(flow, points, where):
    """flow: the report dict so far; points: (Flow, sender Half, receiver Half,
    direction) at every capture point; where(Flow): the point's name."""
    found = []
    changes = (flow["firewall"] or {}).get("changes", [])
    found += _sack(points, changes, where)
    hs = flow["handshake"]
    for direction in ("c2s", "s2c"):
        d = flow["directions"][direction]
        if d["new_bytes"] < MIN_BYTES:
            continue
        sender, receiver = (("client", "server") if direction == "c2s" else ("server", "client"))
        found += _window(d, hs, sender, receiver, direction, changes)
        found += _loss(d, sender, receiver)
    found += _handshake(hs, changes)
    for change in changes:
        stripped = change["kind"] == "option" and change.get("option") in ("sack_permitted",
                                                                             "wscale")
        found.append(_finding("firewall", "warning" if stripped else "info",
                              "firewall: " + change["text"]))
    if not any(f["kind"] == "no-handshake" for f in found) and hs["client"] is None:
        found.append(_finding("no-handshake", "info", "the capture starts after the handshake: "
                              "the options are unknown and windows are shown unscaled"))
    found.sort(key=lambda f: SEVERITY[f["severity"]])
    return found


def overall(found):
    if found and SEVERITY[found[0]["severity"]] <= SEVERITY["warning"]:
        return found[0]
    return {"kind": "healthy", "severity": "ok",
            "text": "healthy: no loss, reordering, window limit or broken SACK found"}


def _sack(points, changes, where):
    found = []
    for flow, half, _, direction in points:
        if not half.sack_outside:
            continue
        receiver = "server" if direction == "c2s" else "client"
        text = (f"broken SACK: {half.sack_outside} of {half.sack_blocks} SACK blocks the "
                f"{receiver} sent, seen at {where(flow)}, lie outside the sender's sequence "
                "space (above anything sent or below what is acknowledged). The sender ignores "
                "them, so SACK recovery fails and each loss costs extra round trips or a "
                "timeout.")
        offsets = [c["offset"] for c in changes if c["kind"] == "seq-offset"
                   and c["direction"] == direction]
        explained = offsets and _shifted(half.sack_samples, offsets[0])
        if explained:
            text += (f" Shifted by the firewall's sequence offset ({offsets[0]:#010x}) they fit: "
                     "the firewall randomises sequence numbers without rewriting SACK blocks "
                     "(Cisco FWSM's defect). Rewrite SACK with the sequence offset (Tusk's "
                     "seqrand helper does) or turn randomisation off for this class.")
        else:
            text += (" This is what a middlebox does that shifts sequence numbers without "
                     "rewriting SACK blocks (Cisco FWSM's sequence randomisation).")
        found.append(_finding("sack-outside", "problem", text, direction=direction,
                              explained=bool(explained)))
    return found


def _shifted(samples, offset):
    """Do the outside blocks fit once shifted back (or forward) by the offset?"""
    if not samples:
        return False
    for sign in (-1, 1):
        fits = 0
        for left, right, ack, snd_max in samples:
            lo = unwrap((left + sign * offset) & MASK, ack)
            hi = unwrap((right + sign * offset) & MASK, lo)
            top = unwrap(snd_max, ack)
            if ack < lo < hi <= top:
                fits += 1
        if fits * 2 > len(samples):
            return True
    return False


def _window(d, hs, sender, receiver, direction, changes):
    limit, achieved, window = d["window_limit_bps"], d["throughput_bps"], d["window"]
    if not limit or not window or not achieved:
        return []
    full_share = d["window_full"] / d["data_packets"] if d["data_packets"] else 0
    if achieved < WINDOW_LIMITED * limit:
        if full_share < WINDOW_FULL and not d["zero_window"]:
            return []
        # the window filled although window / RTT allows far more: the receiving
        # application does not read as fast as the data comes
        return [_finding("receiver-limited", "warning",
                         f"receiver-limited: the {receiver}'s window was full for "
                         f"{full_share:.0%} of the {sender}'s segments"
                         + (f" and closed {d['zero_window']} times" if d["zero_window"] else "")
                         + f", although {size(window['max'])} at {ms(d['rtt_full_ms'])} allows "
                         f"{rate(limit)}: the application on the {receiver} does not read as fast "
                         "as the data arrives", direction=direction)]
    offered = hs[receiver] and hs[receiver]["wscale"] is not None
    asked = hs[sender] and hs[sender]["wscale"] is not None
    stripped = [c for c in changes if c["kind"] == "option" and c.get("option") == "wscale"]
    if window["scaled"]:
        why = (f"the {receiver}'s receive buffer is the limit: raise its maximum "
               "(net.ipv4.tcp_rmem on Linux)")
    elif stripped:
        why = "window scaling was removed on the way: " + stripped[0]["text"]
    elif hs[receiver] is None:
        why = "the handshake was not captured, so window scaling is unknown"
    elif not asked:   # a receiver may only answer a scale option it was offered
        why = f"the {sender} did not offer window scaling, so the {receiver} cannot use it"
    elif not offered:
        why = f"the {receiver} does not use window scaling"
    else:
        why = "window scaling is off"
    return [_finding("window-limited", "problem",
                     f"window-limited: {receiver} window {size(window['max'])} at "
                     f"{ms(d['rtt_full_ms'])} caps this flow at {rate(limit)} "
                     f"(it achieved {rate(achieved)}) — {why}", direction=direction)]


def _loss(d, sender, receiver):
    found = []
    data = d["data_packets"]
    needed, spurious = d["retransmissions"]["needed"], d["retransmissions"]["spurious"]
    if data and needed / data >= LOSS_WARNING:
        share = needed / data
        text = (f"loss: the {sender} retransmitted {needed} segments ({share:.2%} of {data} "
                f"data segments) that the {receiver} needed")
        if d["rtt_full_ms"] and d["mss"]:
            # Mathis et al. 1997: rate <= MSS / RTT * 1.22 / sqrt(p)
            bound = d["mss"] * 8 / (d["rtt_full_ms"] / 1000) * 1.22 / share ** 0.5
            text += (f"; with this loss at {ms(d['rtt_full_ms'])} congestion control caps a "
                     f"flow at about {rate(bound)}")
        found.append(_finding("loss", "problem" if share >= LOSS_PROBLEM else "warning", text))
    if spurious and spurious * 10 >= needed + spurious:
        found.append(_finding("spurious", "warning",
                              f"spurious retransmissions: {spurious} segments the {receiver} "
                              "already had (acknowledged or reported in a D-SACK) were sent "
                              "again: reordering or delay spikes set off loss recovery"))
    if data and d["reordered"] / data >= REORDER_WARNING:
        found.append(_finding("reordering", "warning",
                              f"reordering: {d['reordered']} of the {sender}'s segments "
                              f"({d['reordered'] / data:.2%}) arrived out of order"))
    return found


def _handshake(hs, changes):
    client, server = hs["client"], hs["server"]
    if client is None or server is None:
        return []
    found = []
    if not (client["sack_permitted"] and server["sack_permitted"]):
        stripped = [c for c in changes if c["kind"] == "option"
                    and c.get("option") == "sack_permitted"]
        who = ("the firewall removed it" if stripped else
               "the client did not offer it" if not client["sack_permitted"] else
               "the server did not accept it")
        found.append(_finding("no-sack", "warning",
                              f"SACK is off ({who}): after a loss the sender learns of one "
                              "lost segment per round trip"))
    if client["wscale"] is None or server["wscale"] is None:
        found.append(_finding("no-wscale", "info", "window scaling is off: windows stop at "
                              "64 KiB"))
    if not (client["timestamps"] and server["timestamps"]):
        found.append(_finding("no-timestamps", "info", "TCP timestamps are off: fewer RTT "
                              "samples, no protection against wrapped sequence numbers"))
    return found
