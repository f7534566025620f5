"""seqrand-smp: randomised connections translated on both CPUs at once while their
offsets are being rewritten. Four connections upload 4 MB each, at the same time: two
through class both (conntrack translates), two through class fast (the flowtable
does). Each connection's sender runs on one CPU and its receiver on the other, and
veth runs a packet's path through fw on the CPU that sent it, so every connection is
translated on both CPUs - its data on one, its ACKs on the other. Meanwhile a writer
sets every connection's client offset over ctnetlink to the value it has, again and
again: write sections (kernel-patches/0014) the per-packet reads must retry around,
never read torn. SHA-256 of what was sent and what arrived per connection.

Saved: results.json (per connection: class, intact or the error; the writer's
update count), entries.json (during the transfers), before- and after- state.
"""
import threading

import conntrack
import seqrand

TIME_LIMIT = 180
SIZE = 4 * 1024 * 1024
CLASSES = (("both", seqrand.PORT_BOTH), ("both", seqrand.PORT_BOTH),
           ("fast", seqrand.PORT_FAST), ("fast", seqrand.PORT_FAST))


def run(ctx):
    lab = ctx.lab()
    seqrand.apply_policy(ctx, lab)
    seqrand.save_state(ctx, lab, "before")
    connections = [(name, seqrand.Connection(lab, port, timeout=30)) for name, port in CLASSES]
    for _, connection in connections:
        connection.exchange(b"established")     # the fast ones offloaded from here on
    entries = [conntrack.find(conntrack.entries(lab.fw), c.client_port, port)
               for (_, c), (_, port) in zip(connections, CLASSES)]
    ctx.save_json("entries.json", entries)
    done = threading.Event()
    updates = [0]

    def rewrite():
        while not done.is_set():
            for entry in entries:
                conntrack.update_seqadj(lab.fw, entry, entry["seqadj_orig"])
                updates[0] += 1

    writer = threading.Thread(target=rewrite)
    writer.start()
    outcomes = [{} for _ in connections]

    def upload(connection, cpus, outcome):
        try:
            sent, received = seqrand.transfer(connection.client, connection.server, SIZE,
                                              cpus=cpus)
            outcome["intact"] = sent == received
        except OSError as exc:
            outcome["error"] = repr(exc)

    # sender and receiver on different CPUs, alternating which is which
    threads = [threading.Thread(target=upload, args=(connection, (i % 2, 1 - i % 2), outcome))
               for i, ((_, connection), outcome) in enumerate(zip(connections, outcomes))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    done.set()
    writer.join(30)
    results = {"updates": updates[0], "connections": []}
    for (name, connection), outcome in zip(connections, outcomes):
        results["connections"].append({
            "class": name, "client_port": connection.client_port,
            "intact": outcome.get("intact", False), "error": outcome.get("error", "")})
        connection.close()
    ctx.save_json("results.json", results)
    seqrand.save_state(ctx, lab, "after")

