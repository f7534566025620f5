"""seqrand-ctnetlink: the offsets of a randomised connection (class both) as state
synchronisation sees them. A ctnetlink listener records events from before the
connection opens. Then, as on a firewall taking over from another: the connection's
entry is read over ctnetlink, deleted, and created again from what was read -
helper, offsets, TCP state, mark - and the connection must go on. A second connection
has its entry deleted and not restored: it must stall (the next segment is a new,
untranslated entry picked up in the middle). A third, of class fast, is restored like
the first and must also be offloaded again: the flowtable's fast path takes a restored
randomised entry (ctnetlink gives it an empty synproxy extension, which once kept it
off).

Saved: events.jsonl, traffic-events.json (the events of each connection before its
entry was deleted), entries.json (the entries as read before deletion),
results.json (each connection's fate; the fast one's entry after the restore; what
ctnetlink answered to the lost one's offsets for its midstream entry, to a malformed
update of the restored one's offsets (half_update) and to a UDP entry with offsets),
after- state (seqrand_skipped_midstream).
"""

import conntrack
import seqrand
from pyroute2.netlink.exceptions import NetlinkError

from lab.namespaces import CLIENT_V4, SERVER_V4

TIME_LIMIT = 120
ESTABLISHED = 3
CASES = (("restored", seqrand.PORT_BOTH, True), ("lost", seqrand.PORT_BOTH, False),
         ("restored-fast", seqrand.PORT_FAST, True))


def run(ctx):
    lab = ctx.lab()
    seqrand.apply_policy(ctx, lab)
    events = conntrack.EventLog(lab.fw)
    results, read, traffic = {}, {}, {}
    try:
        for name, port, restore in CASES:
            connection = seqrand.Connection(lab, port, timeout=3)
            connection.exchange(b"before")
            # what the traffic itself reported, up to ESTABLISHED (an event ordered
            # after those of the SYN and SYN/ACK): the re-creation below reports again
            ctx.wait_until(lambda: any(e["orig"]["sport"] == connection.client_port
                                       and e["tcp_state"] == ESTABLISHED
                                       for e in events.events), 5, "the connection's events")
            traffic[name] = [e for e in events.events
                             if e["orig"]["sport"] == connection.client_port]
            entry = conntrack.find(conntrack.entries(lab.fw), connection.client_port, port)
            # offloaded (class fast): its TCP state comes from its events
            entry = conntrack.as_synchronised(entry, traffic[name])
            read[name] = entry
            conntrack.delete(lab.fw, entry)
            if restore:
                conntrack.restore(lab.fw, entry)
            try:
                echo = connection.exchange(b"after the takeover")
                results[name] = {"continued": echo == b"after the takeover", "error": ""}
                if port == seqrand.PORT_FAST:
                    results[name]["entry"] = offloaded_again(lab, connection, port)
            except OSError as exc:
                results[name] = {"continued": False, "error": repr(exc)}
            results[name]["client_port"] = connection.client_port
            if name == "restored":
                results[name]["half_update"] = half_update(lab, connection, port)
            if not restore:
                results[name]["offsets_update"] = offsets_update(lab, connection, port,
                                                                 entry)
            connection.close()
    finally:
        seqrand.save_json_lines(ctx, "events.jsonl", events.close())
    results["udp"] = udp_offsets(lab)
    ctx.save_json("entries.json", read)
    ctx.save_json("traffic-events.json", traffic)
    ctx.save_json("results.json", results)
    seqrand.save_state(ctx, lab, "after")


def offsets_update(lab, connection, port, entry):
    """What ctnetlink answers to the lost connection's offsets for the entry its
    traffic then made, picked up in the middle without the seqadj extension - as
    conntrackd's update when the peer's table got the entry first: refused
    (kernel-patches/0018), so that conntrackd creates it again, or taken without a
    word and left untranslated."""
    found = conntrack.find(conntrack.entries(lab.fw), connection.client_port, port)
    try:
        conntrack.update_seqadj(lab.fw, found, entry["seqadj_orig"])
    except NetlinkError as error:
        return {"refused": error.code, "before": found["seqadj_orig"]}
    after = conntrack.find(conntrack.entries(lab.fw), connection.client_port, port)
    return {"refused": 0, "before": found["seqadj_orig"], "after": after["seqadj_orig"]}


def half_update(lab, connection, port):
    """An update of the restored connection's offsets whose reply direction lacks
    offset_after, the original's being whole: refused, and neither direction changed
    (ctnetlink parses both before it writes; it wrote the original direction and half
    of the reply's, then refused)."""
    found = conntrack.find(conntrack.entries(lab.fw), connection.client_port, port)
    orig, reply = found["seqadj_orig"], found["seqadj_reply"]
    shifted = {key: (value + 7) & 0xffffffff for key, value in orig.items()}
    half = {key: (value + 7) & 0xffffffff for key, value in reply.items()
            if key != "offset_after"}
    try:
        conntrack.update_seqadj(lab.fw, found, shifted, half)
        refused = 0
    except NetlinkError as error:
        refused = error.code
    after = conntrack.find(conntrack.entries(lab.fw), connection.client_port, port)
    return {"refused": refused, "before": [orig, reply],
            "after": [after["seqadj_orig"], after["seqadj_reply"]]}


def udp_offsets(lab):
    """A UDP entry created with offsets: refused (their rewrite would treat its packets
    as TCP), or created, with the status bit that runs the TCP rewrite on them."""
    orig = {"src": CLIENT_V4, "dst": SERVER_V4, "sport": 40123, "dport": 40124}
    try:
        conntrack.create_udp(lab.fw, orig, {"correction_pos": 1, "offset_before": 1000,
                                            "offset_after": 1000})
        refused = 0
    except NetlinkError as error:
        refused = error.code
    found = [e for e in conntrack.entries(lab.fw)
             if e["orig"]["proto"] == 17 and e["orig"]["sport"] == orig["sport"]]
    return {"refused": refused, "entries": found}


def offloaded_again(lab, connection, port):
    """The restored entry once the flowtable took it (the deleted entry's flow leaves at
    the next garbage collection, a second at most), or as it is after 5 s of traffic."""
    return conntrack.offloaded(lab.fw, connection.client_port, port, 5,
                               nudge=lambda: connection.exchange(b"more"))
