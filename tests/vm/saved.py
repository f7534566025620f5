"""Reading what a guest scenario saved (guest/seqrand.py's save_state and its JSON), for
the host-side tests of this folder."""
import json


def load(folder, name):
    return json.loads((folder / name).read_text())


def counters_delta(folder, before="before", after="after"):
    """How fw's /proc/net/nf_conntrack_seqadj counters moved between two saved states."""
    old, new = load(folder, f"{before}-seqadj.json"), load(folder, f"{after}-seqadj.json")
    return {name: new[name] - old.get(name, 0) for name in new}


def nstat(folder, who, state="after"):
    return load(folder, f"{state}-nstat-{who}.json")["kernel"]


def invalid_drops(folder, state="after"):
    """The tusk ruleset's counter of invalid packets (dropped)."""
    counters = load(folder, f"{state}-nft-counters.json")["nftables"]
    return next(c["counter"]["packets"] for c in counters
                if "counter" in c and c["counter"]["name"] == "invalid")
