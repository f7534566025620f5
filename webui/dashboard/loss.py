"""The loss path: every place on this box where a forwarded packet can be dropped, in the
order a packet meets them, read into one flat set of counters per statistics sample
(sampler.py stores it as Sample.loss) and summarised for the Loss page, the dashboard
and /metrics: a total, a rate, and when the counter last grew.

Sources, all read in the target's network namespace except softnet (per CPU, not
namespaced): the interfaces' standard statistics (`ip -s -s -j link`: what every driver
reports through netlink - missed, FIFO, over, CRC, dropped), the root qdisc of each
interface (`tc -s -j qdisc`), /proc/net/softnet_stat, conntrack's per-CPU statistics
(/proc/net/stat/nf_conntrack) and Tusk's seqadj counters. The ruleset's own drops (the
default deny, invalid, classes that drop) are the named counters policy/counters.py
reads; the Loss page shows them beside these.

A key is "<stage>" for the box, "<stage>@<interface>" per interface. Everything here is
pure: the sampler hands in the commands' output, the page hands in the samples. Rows of
the database are the web user's to write, so every value read back is checked to be a
whole number before it counts."""
import json
from dataclasses import dataclass

BOX, INTERFACE = "box", "interface"
RECENT = 600      # seconds: an increase this recent of a stage that should stay at zero alarms


@dataclass(frozen=True)
class Stage:
    key: str
    where: str        # BOX or INTERFACE
    label: str
    zero: bool        # whether it should stay at zero on a healthy box (then it alarms)
    advice: str
    tuning: bool = False     # the advice is a setting of the Tuning page


STAGES = (
    Stage("nic.rx_crc", INTERFACE, "NIC: frames with a bad CRC", True,
          "The link: cable, optics or the partner's port - not this box's load."),
    Stage("nic.rx_missed", INTERFACE, "NIC: missed, no receive buffer", True,
          "The receive ring ran full before the CPU emptied it: larger rings, more queues "
          "(RSS) or interrupt coalescing.", tuning=True),
    Stage("nic.rx_fifo", INTERFACE, "NIC: receive FIFO overrun", True,
          "As missed: larger rings, more queues.", tuning=True),
    Stage("nic.rx_over", INTERFACE, "NIC: ring overrun", True,
          "As missed: larger rings, more queues.", tuning=True),
    Stage("nic.rx_dropped", INTERFACE, "Kernel: dropped on receive", False,
          "Frames no protocol takes (LLDP, an unknown VLAN) count here too; a rate that "
          "follows the traffic is a full backlog: see softnet."),
    Stage("softnet.dropped", BOX, "Softnet: backlog full", True,
          "A CPU's input queue overflowed: raise net.core.netdev_max_backlog, spread "
          "packets over CPUs (RPS).", tuning=True),
    Stage("softnet.flow_limit", BOX, "Softnet: flow limit", True,
          "One flow filled the backlog past its share (net.core.flow_limit_cpu_bitmap): "
          "an elephant on a single CPU; spread it with RSS or RPS.", tuning=True),
    Stage("softnet.time_squeeze", BOX, "Softnet: budget ran out", False,
          "Not a loss: the CPU stopped polling with packets left. Many a second, with "
          "drops beside them: raise net.core.netdev_budget.", tuning=True),
    Stage("conntrack.invalid", BOX, "conntrack: invalid packets", False,
          "Packets conntrack could not place (out of window, a broken handshake); the "
          "ruleset drops them (policy: invalid)."),
    Stage("conntrack.insert_failed", BOX, "conntrack: insert failed", True,
          "A new connection lost a race for its entry (a clash, often UDP); many: raise "
          "nf_conntrack_buckets.", tuning=True),
    Stage("conntrack.drop", BOX, "conntrack: table full, dropped", True,
          "New connections dropped with the table full: raise nf_conntrack_max.",
          tuning=True),
    Stage("conntrack.early_drop", BOX, "conntrack: table full, evicted", True,
          "Unassured entries evicted to make room: raise nf_conntrack_max.", tuning=True),
    Stage("seqadj.icmp_quotes_dropped", BOX, "seqadj: ICMP errors dropped", True,
          "ICMP errors quoting a segment outside the connection's window: a path that "
          "sends stale or forged errors."),
    Stage("seqrand.dropped_nomem", BOX, "seqrand: SYNs dropped, no memory", True,
          "The kernel could not allocate the sequence-adjustment state: memory pressure."),
    Stage("qdisc.drops", INTERFACE, "Queue (qdisc) drops on transmit", True,
          "The interface's queue overflowed: a link slower than what arrives for it, or a "
          "queue too short (txqueuelen)."),
    Stage("nic.tx_dropped", INTERFACE, "Dropped on transmit", True,
          "The driver refused packets: a full transmit ring or a link that went down."),
)
STAGE = {stage.key: stage for stage in STAGES}

_LINK_RX = {"crc_errors": "nic.rx_crc", "missed_errors": "nic.rx_missed",
            "fifo_errors": "nic.rx_fifo", "over_errors": "nic.rx_over",
            "dropped": "nic.rx_dropped"}
_LINK_TX = {"dropped": "nic.tx_dropped"}
# /proc/net/softnet_stat's columns (hex, a line per CPU)
_SOFTNET = {1: "softnet.dropped", 2: "softnet.time_squeeze", 9: "softnet.flow_limit"}
_CONNTRACK = ("invalid", "insert_failed", "drop", "early_drop")
_SEQADJ = ("icmp_quotes_dropped", "seqrand_dropped_nomem")


def whole(value):
    """value if it is a whole number a 64-bit counter can hold (not a bool), else None."""
    return value if type(value) is int and 0 <= value < 1 << 64 else None


def from_links(text):
    """`ip -s -s -j link show`'s output -> {key@ifname: count}; loopback left out."""
    found = {}
    try:
        links = json.loads(text or "[]")
    except ValueError:
        return found
    for link in links if isinstance(links, list) else []:
        if not isinstance(link, dict) or link.get("link_type") == "loopback":
            continue
        stats = link.get("stats64") or link.get("stats") or {}
        for direction, names in (("rx", _LINK_RX), ("tx", _LINK_TX)):
            counters = stats.get(direction) or {}
            for field, key in names.items():
                if whole(counters.get(field)) is not None:
                    found[f"{key}@{link['ifname']}"] = counters[field]
    return found


def from_qdiscs(text):
    """`tc -s -j qdisc show`'s output -> {qdisc.drops@dev: drops} of each root qdisc (an
    mq root's counts are its queues' sum: the children would count twice)."""
    found = {}
    try:
        qdiscs = json.loads(text or "[]")
    except ValueError:
        return found
    for qdisc in qdiscs if isinstance(qdiscs, list) else []:
        if isinstance(qdisc, dict) and qdisc.get("root") and "dev" in qdisc \
                and whole(qdisc.get("drops")) is not None:
            key = f"qdisc.drops@{qdisc['dev']}"
            found[key] = found.get(key, 0) + qdisc["drops"]
    return found


def from_softnet(text):
    """/proc/net/softnet_stat -> the box's totals over its CPUs."""
    found = {}
    for line in (text or "").splitlines():
        fields = line.split()
        for column, key in _SOFTNET.items():
            if column < len(fields):
                try:
                    found[key] = found.get(key, 0) + int(fields[column], 16)
                except ValueError:
                    continue
    return found


def from_conntrack(text):
    """/proc/net/stat/nf_conntrack (a header of names, a line of hex per CPU) -> totals of
    the columns that count losses; the names are the header's, which kernels change."""
    lines = (text or "").splitlines()
    if not lines:
        return {}
    names = lines[0].split()
    found = {}
    for line in lines[1:]:
        for name, value in zip(names, line.split()):
            if name in _CONNTRACK:
                try:
                    found[f"conntrack.{name}"] = found.get(f"conntrack.{name}", 0) + int(value, 16)
                except ValueError:
                    continue
    return found


def seqadj_counters(text):
    """/proc/net/nf_conntrack_seqadj (Tusk's kernel: `name value` lines) -> {name: value};
    None without the file."""
    if text is None:
        return None
    counters = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if value.strip().isdigit():
            counters[name] = int(value)
    return counters


def from_seqadj(counters):
    """The sample's seqadj counters (/proc/net/nf_conntrack_seqadj, Tusk's kernel)."""
    found = {}
    for name in _SEQADJ:
        value = whole((counters or {}).get(name))
        if value is not None:
            found["seqrand.dropped_nomem" if name.startswith("seqrand")
                  else f"seqadj.{name}"] = value
    return found


def counters(link_text, qdisc_text, softnet_text, conntrack_text, seqadj_counters):
    """The loss path's counters of one sample, from the tools' and files' text (the
    sampler's, and the benchmark's in the guest)."""
    found = from_links(link_text)
    found.update(from_qdiscs(qdisc_text))
    found.update(from_softnet(softnet_text))
    found.update(from_conntrack(conntrack_text))
    found.update(from_seqadj(seqadj_counters))
    return found


def split(key):
    """'stage@interface' -> (Stage, interface or ""); None for a key no stage has."""
    stage_key, _, interface = key.partition("@")
    stage = STAGE.get(stage_key)
    if stage is None or (stage.where == INTERFACE) != bool(interface):
        return None
    return stage, interface


@dataclass
class Row:
    stage: Stage
    interface: str
    total: int
    rate: float | None         # per second over the last two samples
    last_increase: object      # the time of the sample that first showed it higher, or None
    alarm: bool

    @property
    def key(self):
        return f"{self.stage.key}@{self.interface}" if self.interface else self.stage.key


def summary(samples, now, recent=RECENT):
    """Samples (oldest first: objects with .taken and .loss) -> a Row per counter of the
    newest sample, in the order of STAGES, then of interfaces. last_increase: None when the
    counter did not grow within the samples (the table keeps an hour)."""
    counted = [(s.taken, s.loss) for s in samples if isinstance(s.loss, dict)]
    if not counted:
        return []
    taken, newest = counted[-1]
    rows = []
    for key, total in newest.items():
        where = split(key)
        if where is None or whole(total) is None:
            continue
        rate = None
        if len(counted) > 1:
            before_taken, before = counted[-2]
            seconds = (taken - before_taken).total_seconds()
            old = whole(before.get(key))
            if old is not None and old <= total and seconds > 0:
                rate = (total - old) / seconds
        last = None
        for (_, before), (t_after, after) in zip(counted[-2::-1], counted[:0:-1]):
            old, new = whole(before.get(key)), whole(after.get(key))
            if old is not None and new is not None and new > old:
                last = t_after
                break
        stage, interface = where
        alarm = stage.zero and last is not None and (now - last).total_seconds() <= recent
        rows.append(Row(stage, interface, total, rate, last, alarm))
    order = {stage.key: index for index, stage in enumerate(STAGES)}
    rows.sort(key=lambda row: (order[row.stage.key], row.interface))
    return rows


def grown(before, after):
    """[(Stage, interface, packets)] of the stages that should stay at zero and grew from
    the counters `before` to `after` (two samples' loss), in STAGES' order."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return []
    found = []
    for key, total in after.items():
        where, old = split(key), whole(before.get(key))
        if where is None or not where[0].zero or whole(total) is None or old is None:
            continue
        if total > old:
            found.append((where[0], where[1], total - old))
    order = {stage.key: index for index, stage in enumerate(STAGES)}
    return sorted(found, key=lambda item: (order[item[0].key], item[1]))
