"""tusk diag: `tusk diag analyze [--json] [--fd N=NAME] FILE...` - the single-flow health report
of pcap/pcapng files, on the appliance or on a laptop (it needs only Python and
dpkt, not Django or a database).

Exit status: 0 a report (possibly partial: damaged files are reported, not fatal),
2 bad usage, 3 no file could be read (the message names each file and why).
"""
import argparse
import json
import sys

from .core import verdict
from .core.analyze import MAX_FLOWS, analyze
from .core.pcapread import CaptureError

UNREADABLE = 3


def main(argv):
    parser = argparse.ArgumentParser(prog="tusk diag")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("analyze", help="TCP health report of pcap/pcapng files")
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="captures; two files (or one with two interfaces) of both sides of "
                        "the firewall also show what it changed")
    p.add_argument("--fd", action="append", default=[], type=_descriptor, metavar="N=NAME",
                   help="also read the open file descriptor N, reported as NAME (how the "
                        "agent's sandbox, which may open no file itself, is given them)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--flows", type=int, default=None, metavar="N",
                   help=f"report the N biggest connections (default {MAX_FLOWS}; text: 10)")
    args = parser.parse_args(argv)
    limit = args.flows if args.flows is not None else (MAX_FLOWS if args.json else 10)
    if limit < 1:
        parser.error("--flows: must be at least 1")
    if not args.files and not args.fd:
        parser.error("name at least one FILE (or --fd)")
    sources = args.files + [fd for fd, _ in args.fd]
    try:
        report = analyze(sources, names=args.files + [name for _, name in args.fd],
                         limit=limit)
    except CaptureError as exc:
        print(f"tusk diag: {exc}", file=sys.stderr)
        return UNREADABLE
    if args.json:
        json.dump(report, sys.stdout, separators=(",", ":"))
        sys.stdout.write("\n")
    else:
        sys.stdout.write(text(report))
    return 0


def _descriptor(value):
    number, _, name = value.partition("=")
    if not number.isdigit() or not name:
        raise argparse.ArgumentTypeError(f"{value!r}: expected N=NAME, N a descriptor number")
    return int(number), name


def text(report):
    lines = []
    for f in report["files"]:
        where = ", ".join(f["interfaces"]) if f["format"] == "pcapng" else ""
        lines.append(f"{f['name']}: {f['format'] or 'unreadable'}, {f['packets']} packets"
                     + (f" on {where}" if where else ""))
        if f["error"]:
            lines.append(f"  ! {f['error']}")
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(report["skipped"].items()))
    lines.append(f"{report['tcp_packets']} TCP segments in {report['flows_total']} connections"
                 + (f" (skipped: {skipped})" if skipped else ""))
    for warning in report["warnings"]:
        if not any(warning == f["error"] for f in report["files"]):
            lines.append(f"! {warning}")
    for flow in report["flows"]:
        lines += [""] + _flow(flow)
    return "\n".join(lines) + "\n"


def _options(opts):
    if opts is None:
        return "not captured"
    parts = [f"MSS {opts['mss']}" if opts["mss"] is not None else "no MSS",
             f"wscale {opts['wscale']}" if opts["wscale"] is not None else "no wscale",
             "SACK-permitted" if opts["sack_permitted"] else "no SACK",
             "timestamps" if opts["timestamps"] else "no timestamps"]
    return ", ".join(parts)


def _flow(flow):
    v = flow["verdict"]
    lines = [f"{flow['client']} -> {flow['server']}  {flow['duration']:.3f} s, "
             f"{flow['packets']} packets",
             f"  verdict [{v['severity']}]: {v['text']}"]
    for point in flow["points"]:
        hs = point["handshake"]
        lines.append(f"  at {point['interface']} ({point['file']}): {point['packets']} packets"
                     + (f", handshake RTT {hs['rtt_ms']} ms" if hs["rtt_ms"] is not None else ""))
        lines.append(f"    client SYN: {_options(hs['client'])}")
        lines.append(f"    server SYN/ACK: {_options(hs['server'])}")
    for name, label in (("c2s", "client -> server"), ("s2c", "server -> client")):
        d = flow["directions"][name]
        if not d["packets"]:
            continue
        rtt = d["rtt_ms"]
        window = d["window"]
        lines.append(
            f"  {label}: {verdict.size(d['new_bytes'])} at {verdict.rate(d['throughput_bps'])}; "
            f"retransmitted {d['retransmissions']['needed']} needed + "
            f"{d['retransmissions']['spurious']} spurious, {d['reordered']} reordered; "
            f"SACK blocks {d['sack']['blocks']} ({d['sack']['outside']} outside, "
            f"{d['sack']['dsack']} D-SACK)"
            + (f"; RTT {rtt['min']}/{rtt['median']}/{rtt['max']} ms ({rtt['samples']} samples)"
               if rtt else "")
            + (f"; window up to {verdict.size(window['max'])}"
               + (f" = {verdict.rate(d['window_limit_bps'])} at {d['rtt_full_ms']} ms"
                  if d["window_limit_bps"] else "") if window else ""))
    for finding in flow["findings"]:
        if finding is not v:
            lines.append(f"  - [{finding['severity']}] {finding['text']}")
    return lines
