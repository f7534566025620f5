"""The network's rows of the dashboard's health panel (dashboard/health.py), registered
in NetworkConfig.ready(): routing - each configured BGP session Established and each BFD
peer up, as the agent's network.routing task last read FRR. Nothing without routing."""
import time

from dashboard.health import check, register, stale_after

from . import draft as drafts


@register
def routing_checks():
    config = drafts.confirmed_config()
    if config is None or not config.routing.enabled:
        return []
    found = drafts.routing_status()
    if found is None:
        return [check("routing", None, "the agent has not read FRR yet")]
    age = time.time() - found["at"]
    if age > stale_after(drafts.ROUTING):
        return [check("routing", False, f"the agent has not read FRR for {age:.0f} s")]
    if not found["running"]:
        return [check("routing", False, "FRR does not answer")]
    down = [f"{s['address']} {s['state']}" for s in found["sessions"]
            if s["state"] != "Established"]
    down += [f"BFD {p['peer']} {p['status']}" for p in found["bfd"] if p["status"] != "up"]
    sessions = len(found["sessions"])
    full = sum(1 for o in found["ospf"] if o["state"] == "Full")
    summary = f"{sessions - len([s for s in found['sessions'] if s['state'] != 'Established'])}" \
        f" of {sessions} BGP sessions up, {full} OSPF adjacencies full"
    return [check("routing", not down, summary + (": down " + ", ".join(down) if down else ""))]
