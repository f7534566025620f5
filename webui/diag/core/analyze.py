"""The single-flow health report: capture files -> a JSON-ready dict.

    report = analyze(["both-sides.pcapng"])            # or several files
    report["flows"][0]["verdict"]["text"]

Each (file, interface) is a capture point. The same connection (same addresses
and ports, overlapping in time) seen at two points is one flow with two points:
the point where the client's SYN appears first is the firewall's ingress for the
client's direction, and comparing the handshakes tells what the firewall changed
(MSS clamped, options stripped, sequence offset). The numbers of a flow are those
of the point that saw most of its packets. The verdicts are in verdict.py.

The report's shape is documented in docs/DIAGNOSTICS.md (version 1).
"""
import os
import socket
import time

from . import verdict
from .decode import decoder
from .flows import MASK, Table
from .pcapread import CaptureError, Reader

VERSION = 1
MAX_FLOWS = 200          # flows in the report (the biggest); the total is counted


def analyze(paths, names=None, progress=None, limit=MAX_FLOWS, flow_limit=20000):
    """Reads every file (pcap or pcapng) and returns the report dict. A file that
    cannot be read at all is reported in files[i]["error"]; if no file can be read,
    raises CaptureError. `progress(packets)` is called every 100 000 packets."""
    names = names or [str(p) for p in paths]
    table = Table(limit=flow_limit)
    files, skipped = [], {}
    points = []            # (file name, interface name)
    packets = tcp = 0
    started = time.monotonic()
    readable = 0
    for path, name in zip(paths, names):
        entry = {"name": name, "format": None, "packets": 0, "interfaces": [], "error": None}
        files.append(entry)
        try:
            reader = Reader(path, name)
        except (CaptureError, OSError) as exc:
            entry["error"] = str(exc) if isinstance(exc, CaptureError) else \
                f"{name}: {exc.strerror or exc}"
            continue
        readable += 1
        entry["format"] = reader.format
        decoders, point_ids, labels = {}, {}, {}
        lookup = table.lookup
        with reader:
            for ts, index, frame in reader:
                packets += 1
                entry["packets"] += 1
                if packets % 100000 == 0 and progress:
                    progress(packets)
                decode = decoders.get(index)
                if decode is None:
                    # one point per interface name: concatenated pcapng sections (ring
                    # buffer files) declare the same interfaces again
                    interface = reader.interfaces[index]
                    decode = decoders[index] = decoder(interface.linktype)
                    label = interface.name or (f"interface {index}" if reader.format == "pcapng"
                                               else None)
                    if label not in labels:
                        labels[label] = len(points)
                        points.append((name, label))
                    point_ids[index] = labels[label]
                segment = decode(frame)
                if type(segment) is str:
                    skipped[segment] = skipped.get(segment, 0) + 1
                    continue
                tcp += 1
                src, dst, sport, dport, seq, ack, flags, window, opts, length = segment
                found = lookup(point_ids[index], src, sport, dst, dport, ts, flags, seq)
                if found is not None:
                    found[0].packet(ts, found[1], seq, ack, flags, window, opts, length)
        entry["interfaces"] = [i.name or f"interface {n}" for n, i in enumerate(reader.interfaces)]
        if reader.damage:
            entry["error"] = reader.damage
    if not readable:
        raise CaptureError("; ".join(f["error"] for f in files))
    flows = table.finish()
    groups = _group(flows)
    several = len(paths) > 1
    shown = [_flow(group, points, several) for group in groups[:limit]]
    warnings = [f["error"] for f in files if f["error"] and f["format"]]
    if table.untracked:
        warnings.append(f"{table.untracked} connections were not analysed: more than "
                        f"{table.limit} were open at once")
    if len(groups) > limit:
        warnings.append(f"{len(groups)} connections found; the {limit} biggest are reported")
    if packets and not tcp:
        warnings.append("no TCP segment found in the capture")
    return {"version": VERSION, "files": files, "packets": packets, "tcp_packets": tcp,
            "skipped": skipped, "flows_total": len(groups) + table.untracked,
            "seconds": round(time.monotonic() - started, 3), "warnings": warnings,
            "flows": shown}


def _key(flow):
    (a, ap), (b, bp) = flow.ends
    return (a, ap, b, bp) if (a, ap) <= (b, bp) else (b, bp, a, ap)


def _group(flows):
    """Flows at different points with the same ends and overlapping times: one
    connection. Biggest connection first."""
    groups = {}
    for flow in flows:
        for group in groups.setdefault(_key(flow), []):
            if all(other.point != flow.point and flow.start <= other.last + 1 and
                   other.start <= flow.last + 1 for other in group):
                group.append(flow)
                break
        else:
            groups[_key(flow)].append([flow])
    found = [g for bucket in groups.values() for g in bucket]
    found.sort(key=lambda g: (-max(f.bytes for f in g), min(f.order for f in g)))
    return found


def _address(ip, port):
    family = socket.AF_INET if len(ip) == 4 else socket.AF_INET6
    text = socket.inet_ntop(family, ip)
    return f"{text}:{port}" if family == socket.AF_INET else f"[{text}]:{port}"


def _client(flow):
    """Index of the client end: who sent the SYN; without one, the higher port."""
    if flow.client is not None:
        return flow.client
    (_, ap), (_, bp) = flow.ends
    return 0 if ap > bp else 1


def _flow(group, points, several):
    def where(flow):
        """A point's name: the interface; a pcap file (no interface names) by its
        file name; with several files, both."""
        name, interface = points[flow.point]
        base = os.path.basename(name)
        if interface is None:
            return base
        return f"{interface} in {base}" if several else interface

    # the client's SYN reaches the ingress point first
    group.sort(key=lambda f: (f.halves[_client(f)].syn_time is None,
                              f.halves[_client(f)].syn_time or f.start))
    main = max(group, key=lambda f: (f.packets, -f.order))
    c = _client(main)
    cs, sc = main.halves[c], main.halves[1 - c]
    client, server = _address(*main.ends[c]), _address(*main.ends[1 - c])
    start = min(f.start for f in group)
    last = max(f.last for f in group)
    result = {
        "id": f"{client}-{server}-{int(start * 1000)}",
        "client": client, "server": server, "start": start,
        "duration": round(last - start, 6),
        "packets": main.packets,
        "bytes": {"c2s": cs.new_bytes, "s2c": sc.new_bytes},
        "throughput_bps": {"c2s": _throughput(cs), "s2c": _throughput(sc)},
        "handshake": _handshake(main, c),
        "points": [{"file": points[f.point][0], "interface": where(f),
                    "packets": f.packets, "handshake": _handshake(f, _client(f)),
                    "main": f is main} for f in group],
        "firewall": _firewall(group, where) if len(group) > 1 else None,
        "directions": {"c2s": _direction(main, cs, sc, c), "s2c": _direction(main, sc, cs, 1 - c)},
    }
    for name in ("c2s", "s2c"):
        result["directions"][name]["mss"] = _mss(group)
    result["findings"] = verdict.findings(result, group_halves(group), where)
    result["verdict"] = verdict.overall(result["findings"])
    return result


def _mss(group):
    """The segment size of both senders: the smallest MSS either SYN carried at any point
    (a clamp lowers it on the way); None without a handshake. Captures on Linux
    show GRO/TSO super-packets, so the largest segment seen is no measure of it."""
    values = [opts["mss"] for flow in group for half in flow.halves
              if (opts := half.opts) is not None and opts["mss"]]
    return min(values) if values else None


def group_halves(group):
    """(interface, half, other half, client?) of every point, client's data first:
    what the SACK check needs at each point."""
    found = []
    for flow in group:
        c = _client(flow)
        found.append((flow, flow.halves[c], flow.halves[1 - c], "c2s"))
        found.append((flow, flow.halves[1 - c], flow.halves[c], "s2c"))
    return found


def _throughput(half):
    if half.first_data is None or half.last_data is None or half.last_data <= half.first_data:
        return 0.0
    return round(half.new_bytes * 8 / (half.last_data - half.first_data), 1)


def _handshake(flow, c):
    client, server = flow.halves[c].opts, flow.halves[1 - c].opts
    rtt = flow.handshake_rtt()
    return {"client": client, "server": server,
            "rtt_ms": round(rtt * 1000, 3) if rtt is not None else None}


def _rtt_full(flow, half, c_is_sender):
    """The round trip of this direction's data: from this point to the receiver and
    back (data -> ACK), plus this point to the sender and back (from the
    handshake). Falls back to the handshake's round trip, then to what we have."""
    times = flow.handshake
    down = half.rtt_median()
    up = None
    if "syn" in times and "synack" in times and "ack" in times:
        up = (times["ack"] - times["synack"]) if c_is_sender else (times["synack"] - times["syn"])
    if down is not None and up is not None:
        return max(down + up, flow.handshake_rtt())
    return flow.handshake_rtt() or down


def _direction(flow, half, other, index):
    c_is_sender = index == _client(flow)
    rtt_full = _rtt_full(flow, half, c_is_sender)
    limit = None
    if half.rwnd_max and rtt_full:
        limit = round(half.rwnd_max * 8 / rtt_full, 1)
    median = half.rtt_median()
    base = half.base if half.base is not None else 0
    return {
        "packets": half.packets, "data_packets": half.data_packets, "bytes": half.bytes,
        "new_bytes": half.new_bytes,
        "retransmissions": {"needed": half.needed, "spurious": half.spurious},
        "reordered": half.reordered, "keepalives": half.keepalives,
        "sack": {"blocks": half.sack_blocks, "outside": half.sack_outside, "dsack": half.dsack},
        "rtt_ms": None if median is None else {
            "min": round(half.rtt_min * 1000, 3), "median": round(median * 1000, 3),
            "max": round(half.rtt_max * 1000, 3), "samples": half.rtt_count},
        "rtt_full_ms": None if rtt_full is None else round(rtt_full * 1000, 3),
        "window": None if half.rwnd_max is None else {
            "min": half.rwnd_min, "max": half.rwnd_max,
            "scaled": bool(half.opts and other.opts and half.opts["wscale"] is not None and
                           other.opts["wscale"] is not None)},
        "window_full": half.full, "zero_window": half.zero_window,
        "window_limit_bps": limit,
        "throughput_bps": _throughput(half),
        "mss_seen": half.mss_seen,
        "isn": half.syn, "base": base & MASK,
        "series": {"throughput": half.series.rates(),
                   "seq": [[round(t, 6), v] for t, v in half.seq.points],
                   "retransmits": [[round(t, 6), v] for t, v in half.marks.points],
                   "bucket_s": half.series.width},
    }


def _firewall(group, _where):
    """What changed between the first point (ingress for the client's direction)
    and each other point: MSS, options, sequence offsets."""
    first, changes = group[0], []
    fc = _client(first)
    for other in group[1:]:
        oc = _client(other)
        pairs = (("c2s", "client's SYN", first.halves[fc], other.halves[oc], first, other),
                 ("s2c", "server's SYN/ACK", other.halves[1 - oc], first.halves[1 - fc],
                  other, first))
        for direction, what, before, after, came, went in pairs:
            if before.opts is None or after.opts is None:
                continue
            b, a = before.opts, after.opts
            if b["mss"] != a["mss"]:
                changes.append({"kind": "mss", "direction": direction, "before": b["mss"],
                                "after": a["mss"],
                                "text": f"MSS in the {what} changed from {b['mss']} to "
                                        f"{a['mss']} between {_where(came)} and {_where(went)}"})
            for option, label in (("wscale", "window scale"), ("sack_permitted", "SACK-permitted"),
                                  ("timestamps", "timestamps")):
                had = b[option] not in (None, False)
                has = a[option] not in (None, False)
                if had and not has:
                    changes.append({"kind": "option", "option": option, "direction": direction,
                                    "text": f"{label} removed from the {what} between "
                                            f"{_where(came)} and {_where(went)}"})
                elif option == "wscale" and had and has and b[option] != a[option]:
                    changes.append({"kind": "option", "option": option, "direction": direction,
                                    "text": f"window scale in the {what} changed from "
                                            f"{b[option]} to {a[option]}"})
            if before.syn is not None and after.syn is not None:
                offset = (after.syn - before.syn) & MASK
                if offset:
                    changes.append({"kind": "seq-offset", "direction": direction,
                                    "offset": offset,
                                    "text": f"sequence numbers of the "
                                            f"{'client' if direction == 'c2s' else 'server'} "
                                            f"shifted by {offset} ({offset:#010x}) between "
                                            f"{_where(came)} and {_where(went)}"})
    return {"ingress": _where(first), "egress": ", ".join(_where(f) for f in group[1:]),
            "changes": changes, "points": [_where(f) for f in group]}

