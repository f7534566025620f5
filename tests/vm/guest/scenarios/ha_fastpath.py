"""ha-fastpath: a connection on the fast path, randomised, that a backup learns from a
dump of the master's table (tests/netns/hapair.py, each firewall with the Tusk policy:
class fast, seqrand both, fastpath: true) on Tusk's kernel.

conntrackd fills its cache from a dump of the kernel's table when it starts (the
agent restarts it when an HA change is applied) and when its box becomes master
(ha-notify: -f, -R). A dump of an offloaded entry left out its timeout and TCP state
before kernel-patches/0019, and a peer cannot create an entry without a timeout: a
backup that booted after that never learnt the connection, and the next failover lost
it (make bench-ha, fast path rows).

The flow's entry offloaded on fwA; fwA's conntrackd restarted (its cache from a dump);
fwB comes back as after a boot and asks fwA for its table; then fwA dies and fwB must
carry the flow on. Saved: a-offloaded.json (fwA's entry, as its dump shows it),
b-entries.json (fwB's table once it learnt, or at the deadline), sync-{a,b}.json,
flow.json (chunks echoed, error, "learnt" and, if not, why; chunks echoed through fwB
after the failover).
"""
import conntrack
import seqrand
from hapair import Flow, Pair
from scenario import pair_firewall, pair_policy

TIME_LIMIT = 240
PORT = seqrand.PORT_BOTH
ADVERT_MS = 1000
POLICY = pair_policy("fast", PORT, ", seqrand: both, fastpath: true")


def run(ctx):
    policy = ctx.dir / "policy.yaml"
    policy.write_text(POLICY)
    pair = Pair("hf", ctx.dir / "pair", advert_ms=ADVERT_MS,
                firewall=pair_firewall(ctx, policy, "fast"))
    try:
        pair.up()
        pair.settled(seconds=4)
        flow = Flow(pair, PORT, chunk_bytes=4096, pause=0.01, timeout=30)
        said = {"client_port": flow.client_port, "learnt": False}
        try:
            flow.progress(30, seconds=60)
            pair.wait_entries("b", PORT, seconds=60)
            ctx.save_json("a-offloaded.json", conntrack.offloaded(
                pair.names["a"], flow.client_port, PORT, 30))
            # fwA's cache now comes from a dump of its table, the entry offloaded in it
            pair.stop_conntrackd("a")
            pair.start_conntrackd("a")
            pair.wait_cached("a")
            pair.fail("b")
            pair.reboot("b")
            pair.wait_state("b", "BACKUP", seconds=30)
            try:
                pair.wait_entries("b", PORT, seconds=30)
                said["learnt"] = True
            except AssertionError as error:
                said["why"] = str(error)[:2000]
            ctx.save_json("b-entries.json", conntrack.entries(pair.names["b"]))
            for side in ("a", "b"):
                ctx.save_json(f"sync-{side}.json", pair.stats(side))
            if said["learnt"]:
                pair.fail("a")
                pair.wait_state("b", "MASTER", seconds=30)
                before = flow.echoed
                flow.progress(60, seconds=90)
                said["echoed_after_failover"] = flow.echoed - before
        finally:
            flow.finish()
            said.update(echoed=flow.echoed, error=repr(flow.error) if flow.error else "")
            ctx.save_json("flow.json", said)
    finally:
        pair.down()

