"""A whole flows.sample row as the agent stores it (flows/contracts.py), for the tests
that write one as the web user could. A module of its own: test modules import it."""
import time


def flow_sample(**changes):
    """A whole flows.sample row as the agent stores it (flows/contracts.py): one flow."""
    flow = {"id": 7, "family": 4, "proto": 6, "protocol": "tcp",
            "orig": {"src": "10.0.0.1", "dst": "10.0.0.2", "sport": 40000, "dport": 5201},
            "reply": {"src": "10.0.0.2", "dst": "10.0.0.1", "sport": 5201, "dport": 40000},
            "nat": False, "zone": 0, "mark": 0, "class": 1, "fastpath": False,
            "offloaded": False, "in_hardware": False, "bps": [8_000_000, 0],
            "history": [8_000_000], "estimate": 8_000_000, "bytes": [10 << 20, 4096],
            "packets": [7000, 3000], "age": 12.0, "state": "ESTABLISHED", "helper": "",
            "seqadj": None}
    row = {"at": time.time(), "interval": 1.0, "entries": 3, "max": 262144, "min_bytes": 1,
           "tracked": 1, "flows": [flow], "cpu": {"sample": 0.001, "share": 0.001},
           "pass": {"number": 2, "last": {"classes": {"1": [1, 10 << 20]}}, "read": None}}
    return {**row, **changes}
