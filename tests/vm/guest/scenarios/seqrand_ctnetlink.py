"""seqrand-ctnetlink: the offsets of a randomised connection (class both) as state
synchronisation sees them. A ctnetlink listener records events from before the
connection opens. Then, as on a firewall taking over from another: the connection's
entry is read over ctnetlink, deleted, and created again from what was read -
helper, offsets, TCP state - and the connection must go on. A second connection has
its entry deleted and not restored: it must stall (the next segment is a new,
untranslated entry picked up in the middle).

Saved: events.jsonl, traffic-events.json (the events of each connection before its
entry was deleted), entries.json (the entries as read before deletion),
results.json (each connection's fate), after- state (seqrand_skipped_midstream).
"""
import conntrack
import seqrand

TIME_LIMIT = 120
ESTABLISHED = 3


def run(ctx):
    lab = ctx.lab()
    seqrand.apply_policy(ctx, lab)
    events = conntrack.EventLog(lab.fw)
    results, read, traffic = {}, {}, {}
    try:
        for name, restore in (("restored", True), ("lost", False)):
            connection = seqrand.Connection(lab, seqrand.PORT_BOTH, timeout=3)
            connection.exchange(b"before")
            # what the traffic itself reported, up to ESTABLISHED (an event ordered
            # after those of the SYN and SYN/ACK): the re-creation below reports again
            ctx.wait_until(lambda: any(e["orig"]["sport"] == connection.client_port
                                       and e["tcp_state"] == ESTABLISHED
                                       for e in events.events), 5, "the connection's events")
            traffic[name] = [e for e in events.events
                             if e["orig"]["sport"] == connection.client_port]
            entry = conntrack.find(conntrack.entries(lab.fw), connection.client_port,
                                   seqrand.PORT_BOTH)
            read[name] = entry
            conntrack.delete(lab.fw, entry)
            if restore:
                conntrack.restore(lab.fw, entry)
            try:
                echo = connection.exchange(b"after the takeover")
                results[name] = {"continued": echo == b"after the takeover", "error": ""}
            except OSError as exc:
                results[name] = {"continued": False, "error": repr(exc)}
            results[name]["client_port"] = connection.client_port
            connection.close()
    finally:
        seqrand.save_json_lines(ctx, "events.jsonl", events.close())
    ctx.save_json("entries.json", read)
    ctx.save_json("traffic-events.json", traffic)
    ctx.save_json("results.json", results)
    seqrand.save_state(ctx, lab, "after")
