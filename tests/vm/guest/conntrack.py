"""Conntrack entries over ctnetlink (pyroute2), the way state synchronisation sees
them: dumps and events with their sequence adjustment, and re-creating an entry with
its offsets on a firewall that lost it. conntrack(8) of conntrack-tools 1.4.8 prints
no offsets, hence this.
"""
import select
import socket
import threading
import time

from pcaps import netns
from pyroute2.netlink import NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST, nla
from pyroute2.netlink.nfnetlink import NFNL_SUBSYS_CTNETLINK
from pyroute2.netlink.nfnetlink.nfctsocket import (
    IPCTNL_MSG_CT_DELETE,
    IPCTNL_MSG_CT_GET,
    IPCTNL_MSG_CT_NEW,
    NFCTAttrTuple,
    NFCTSocket,
    nfct_msg,
    terminate_error_msg,
)

IPS_SEEN_REPLY, IPS_ASSURED, IPS_CONFIRMED = 1 << 1, 1 << 2, 1 << 3
IPS_OFFLOAD = 1 << 14
TCP_CONNTRACK_ESTABLISHED = 3


class ct_msg(nfct_msg):
    """nfct_msg with CTA_HELP as the kernel sends and takes it: nested, CTA_HELP_NAME."""
    nla_map = tuple(("CTA_HELP", "cta_help") if name == "CTA_HELP" else (name, kind)
                    for name, kind in nfct_msg.nla_map)
    # pyroute2 caches a compiled nla_map per class in (name-mangled) class attributes,
    # which a subclass would otherwise inherit from nfct_msg
    _nlmsg_base__compiled_nla = False

    class cta_help(nla):
        nla_map = (("CTA_HELP_UNSPEC", "none"), ("CTA_HELP_NAME", "asciiz"),
                   ("CTA_HELP_INFO", "hex"))


class Ctnl(NFCTSocket):
    policy = {(NFNL_SUBSYS_CTNETLINK << 8) | kind: ct_msg
              for kind in (IPCTNL_MSG_CT_NEW, IPCTNL_MSG_CT_GET, IPCTNL_MSG_CT_DELETE)}


def open_in(ns, family=socket.AF_INET):
    """A ctnetlink socket of namespace ns (a socket stays where it was created)."""
    with netns(ns):
        return Ctnl(nfgen_family=family)


def entries(ns):
    """Every conntrack entry of ns, IPv4 and IPv6, as plain data."""
    found = []
    for family in (socket.AF_INET, socket.AF_INET6):
        with open_in(ns, family) as sock:
            found.extend(describe(message) for message in sock.dump())
    return found


def describe(message):
    """A ctnetlink conntrack message (dump or event) as plain data."""
    def tuple_of(name):
        found = message.get_attr(name)
        if found is None:
            return None
        ip, proto = found.get_attr("CTA_TUPLE_IP"), found.get_attr("CTA_TUPLE_PROTO")
        return {"src": ip.get_attr("CTA_IP_V4_SRC") or ip.get_attr("CTA_IP_V6_SRC"),
                "dst": ip.get_attr("CTA_IP_V4_DST") or ip.get_attr("CTA_IP_V6_DST"),
                "proto": proto.get_attr("CTA_PROTO_NUM"),
                "sport": proto.get_attr("CTA_PROTO_SRC_PORT"),
                "dport": proto.get_attr("CTA_PROTO_DST_PORT")}

    def seqadj_of(name):
        found = message.get_attr(name)
        if found is None:
            return None
        return {"correction_pos": found.get_attr("CTA_NAT_SEQ_CORRECTION_POS"),
                "offset_before": found.get_attr("CTA_NAT_SEQ_OFFSET_BEFORE"),
                "offset_after": found.get_attr("CTA_NAT_SEQ_OFFSET_AFTER")}

    def bytes_of(name):
        """The direction's bytes (nf_conntrack_acct), None without accounting."""
        found = message.get_attr(name)
        return None if found is None else found.get_attr("CTA_COUNTERS_BYTES")

    protoinfo = message.get_attr("CTA_PROTOINFO")
    tcp = protoinfo.get_attr("CTA_PROTOINFO_TCP") if protoinfo else None
    helper = message.get_attr("CTA_HELP")
    return {"type": message["header"]["type"] & 0xff,
            "orig": tuple_of("CTA_TUPLE_ORIG"), "reply": tuple_of("CTA_TUPLE_REPLY"),
            "status": message.get_attr("CTA_STATUS"),
            "mark": message.get_attr("CTA_MARK"),
            "timeout": message.get_attr("CTA_TIMEOUT"),
            "tcp_state": tcp.get_attr("CTA_PROTOINFO_TCP_STATE") if tcp else None,
            "wscale": ([tcp.get_attr("CTA_PROTOINFO_TCP_WSCALE_ORIGINAL"),
                        tcp.get_attr("CTA_PROTOINFO_TCP_WSCALE_REPLY")] if tcp else None),
            "helper": helper.get_attr("CTA_HELP_NAME") if helper else None,
            "seqadj_orig": seqadj_of("CTA_SEQ_ADJ_ORIG"),
            "seqadj_reply": seqadj_of("CTA_SEQ_ADJ_REPLY"),
            "bytes": [bytes_of("CTA_COUNTERS_ORIG"), bytes_of("CTA_COUNTERS_REPLY")]}


def find(found, sport, dport, dst=None):
    """The entry of the TCP connection sport -> dport (original direction), to the
    address dst if given (a client may use one port towards two servers)."""
    matches = [e for e in found if e["orig"] and e["orig"]["proto"] == socket.IPPROTO_TCP
               and e["orig"]["sport"] == sport and e["orig"]["dport"] == dport
               and dst in (None, e["orig"]["dst"])]
    if len(matches) != 1:
        raise AssertionError(f"{len(matches)} conntrack entries for {sport} -> {dst}:{dport}")
    return matches[0]


def offloaded(ns, sport, dport, seconds, nudge=None):
    """The entry of the connection sport -> dport in ns once the flowtable carries it,
    or as it is after `seconds`; nudge() runs between looks (traffic that takes it)."""
    deadline = time.monotonic() + seconds
    while True:
        entry = find(entries(ns), sport, dport)
        if entry["status"] & IPS_OFFLOAD or time.monotonic() > deadline:
            return entry
        if nudge is not None:
            nudge()
        time.sleep(0.1)


def _tuple(data):
    return NFCTAttrTuple(saddr=data["src"], daddr=data["dst"], proto=data["proto"],
                         sport=data["sport"], dport=data["dport"])


def delete(ns, entry):
    with open_in(ns) as sock:
        sock.request(ct_msg.create_from(tuple_orig=_tuple(entry["orig"])),
                     IPCTNL_MSG_CT_DELETE, msg_flags=NLM_F_REQUEST | NLM_F_ACK,
                     terminate=terminate_error_msg)


def _seqadj(data):
    return {"attrs": [[f"CTA_NAT_SEQ_{key.upper()}", data[key]]
                      for key in ("correction_pos", "offset_before", "offset_after")
                      if key in data]}


def update_seqadj(ns, entry, seqadj_orig, seqadj_reply=None):
    """Changes the sequence adjustment of the IPv4 entry in ns: the original direction's
    to seqadj_orig ({correction_pos, offset_before, offset_after}), and the reply's to
    seqadj_reply if given, as conntrackd updates an entry it already committed. A key
    left out of a direction is left out of the message (a malformed update)."""
    attrs = {"tuple_orig": _tuple(entry["orig"]), "seq_adj_orig": _seqadj(seqadj_orig)}
    if seqadj_reply is not None:
        attrs["seq_adj_reply"] = _seqadj(seqadj_reply)
    with open_in(ns) as sock:
        sock.request(ct_msg.create_from(**attrs),
                     IPCTNL_MSG_CT_NEW, msg_flags=NLM_F_REQUEST | NLM_F_ACK,
                     terminate=terminate_error_msg)


def create_udp(ns, orig, seqadj_orig, timeout=60):
    """Creates a UDP entry (orig: {src, dst, sport, dport}, its reply the reverse) in ns
    with sequence adjustment, which only TCP has: what a confused or hostile
    ctnetlink client may send."""
    reply = {"src": orig["dst"], "dst": orig["src"], "proto": 17,
             "sport": orig["dport"], "dport": orig["sport"]}
    attrs = {"tuple_orig": _tuple(dict(orig, proto=17)), "tuple_reply": _tuple(reply),
             "status": IPS_CONFIRMED, "timeout": timeout,
             "seq_adj_orig": _seqadj(seqadj_orig)}
    with open_in(ns) as sock:
        sock.request(ct_msg.create_from(**attrs), IPCTNL_MSG_CT_NEW,
                     msg_flags=NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
                     terminate=terminate_error_msg)


def restore(ns, entry):
    """Creates entry (as describe() gave it) in ns with its helper, mark and sequence
    adjustment, as conntrackd commits a connection on the firewall taking over."""
    attrs = {"tuple_orig": _tuple(entry["orig"]), "tuple_reply": _tuple(entry["reply"]),
             # the kernel confirms a created entry first and refuses a status without it
             "status": entry["status"] & (IPS_SEEN_REPLY | IPS_ASSURED | IPS_CONFIRMED),
             "timeout": entry["timeout"],
             "protoinfo": {"attrs": [["CTA_PROTOINFO_TCP", {"attrs": [
                 ["CTA_PROTOINFO_TCP_STATE", entry["tcp_state"]],
                 ["CTA_PROTOINFO_TCP_WSCALE_ORIGINAL", entry["wscale"][0]],
                 ["CTA_PROTOINFO_TCP_WSCALE_REPLY", entry["wscale"][1]]]}]]}}
    if entry["helper"]:
        attrs["help"] = {"attrs": [["CTA_HELP_NAME", entry["helper"]]]}
    if entry["mark"]:           # Tusk's class and fast-path bits
        attrs["mark"] = entry["mark"]
    for key in ("seqadj_orig", "seqadj_reply"):
        if entry[key]:
            attrs[key.replace("seqadj", "seq_adj")] = _seqadj(entry[key])
    with open_in(ns) as sock:
        sock.request(ct_msg.create_from(**attrs), IPCTNL_MSG_CT_NEW,
                     msg_flags=NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
                     terminate=terminate_error_msg)


def as_synchronised(entry, events, timeout=3600):
    """entry (from a dump) as state synchronisation holds it: ctnetlink dumps neither the
    TCP state nor the timeout of an offloaded entry, which conntrackd has from the
    connection's events (the last of events, describe()d, that carried them); timeout
    if none did."""
    if entry["tcp_state"] is not None:
        return entry
    last = [e for e in events if e["orig"] == entry["orig"] and e["tcp_state"] is not None]
    if not last:
        raise AssertionError(f"no event carried the TCP state of {entry['orig']}")
    return dict(entry, tcp_state=last[-1]["tcp_state"], wscale=last[-1]["wscale"],
                timeout=entry["timeout"] or last[-1]["timeout"] or timeout)


class EventLog:
    """ctnetlink events (new and updated entries) of namespace ns, collected in a thread
    from before the traffic starts: what an event-driven conntrackd would learn."""

    NEW_AND_UPDATE = 0b11       # NFNLGRP_CONNTRACK_NEW (1) and _UPDATE (2) as a bind mask

    def __init__(self, ns):
        self.sock = open_in(ns)
        self.sock.bind(groups=self.NEW_AND_UPDATE)
        self.events = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._collect, daemon=True)
        self._thread.start()

    def _collect(self):
        while not self._stop.is_set():
            ready, _, _ = select.select([self.sock], [], [], 0.1)
            if ready:
                self.events.extend(describe(m) for m in self.sock.get()
                                   if m.get_attr("CTA_TUPLE_ORIG") is not None)

    def close(self):
        self._stop.set()
        self._thread.join(5)
        self.sock.close()
        return self.events
