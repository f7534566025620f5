"""The firewall's log records, as ulogd's JSON output plugin writes them: one JSON object
a line, appended to the log directory's current file (plain Python: the web process
reads them, the agent rotates the files, the tests parse them).

A record is a packet the policy logged: NFLOG group 1 with the prefix
tusk:<verdict>:<class> (the default deny: tusk:drop: with no class). The fields used:

    oob.prefix                  the prefix: verdict and class
    oob.time.sec, .usec         when the kernel logged it, if the packet carried a time
    timestamp                   else when ulogd read it: ISO 8601, UTC (ulogd runs with
                                TZ=UTC: its JSON plugin prints no offset)
    oob.in, oob.out             input and output interface ("" if none)
    ip.protocol                 IP protocol number
    src_ip, dest_ip             addresses, as text
    src_port, dest_port         TCP, UDP, SCTP, UDP-Lite ports
    icmp.type, icmp.code, icmpv6.type, icmpv6.code
    tcp.syn, .ack, .fin, .rst   TCP flags
    raw.pktlen                  the packet's length

A line that is not such a record (cut short, another prefix, not JSON) is skipped."""
import ipaddress
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from .choices import PROTOCOL_NAMES, VERDICTS

PREFIX = re.compile(rf"tusk:({'|'.join(VERDICTS)}):([a-z][a-z0-9_-]{{0,31}}|)")
TCP_FLAGS = ("syn", "ack", "fin", "rst", "psh", "urg")


@dataclass(frozen=True)
class Record:
    """One logged packet. cls is "" for the default deny; ports are None for protocols
    without them."""

    time: float   # seconds since the epoch
    verdict: str
    cls: str
    interface_in: str
    interface_out: str
    protocol: int | None
    source: str
    destination: str
    source_port: int | None = None
    destination_port: int | None = None
    icmp: str = ""        # "type/code" for ICMP and ICMPv6
    tcp_flags: str = ""   # "SYN ACK" ...
    length: int | None = None

    @property
    def protocol_name(self):
        if self.protocol is None:
            return ""
        return PROTOCOL_NAMES.get(self.protocol, str(self.protocol))

    @property
    def when(self):
        return datetime.fromtimestamp(self.time, UTC)


def _time(data):
    seconds = data.get("oob.time.sec")
    if isinstance(seconds, int) and not isinstance(seconds, bool):
        micro = data.get("oob.time.usec")
        return seconds + (micro / 1e6 if isinstance(micro, int) else 0)
    text = data.get("timestamp")
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _text(data, key):
    value = data.get(key, "")
    return value if isinstance(value, str) else ""


def _number(data, key):
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse(line):
    """The Record of one line (bytes or str), or None."""
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    prefix = PREFIX.fullmatch(_text(data, "oob.prefix"))
    moment = _time(data)
    if not prefix or moment is None:
        return None
    icmp = ""
    for family in ("icmp", "icmpv6"):
        kind = _number(data, f"{family}.type")
        if kind is not None:
            icmp = f"{kind}/{_number(data, f'{family}.code')}"
    flags = " ".join(flag.upper() for flag in TCP_FLAGS if data.get(f"tcp.{flag}") in (1, True))
    return Record(time=moment, verdict=prefix.group(1), cls=prefix.group(2),
                  interface_in=_text(data, "oob.in"), interface_out=_text(data, "oob.out"),
                  protocol=_number(data, "ip.protocol"), source=_text(data, "src_ip"),
                  destination=_text(data, "dest_ip"), source_port=_number(data, "src_port"),
                  destination_port=_number(data, "dest_port"), icmp=icmp, tcp_flags=flags,
                  length=_number(data, "raw.pktlen"))


@dataclass(frozen=True)
class Filter:
    """What a record must match; None (or an empty set) matches anything. cls "" is the
    default deny. interfaces: a zone's, matched against either side; address: an
    ip_network matched against source or destination; port: either port."""

    since: float | None = None
    until: float | None = None
    cls: str | None = None
    verdict: str | None = None
    interfaces: frozenset | None = None
    address: object = None
    port: int | None = None
    protocol: int | None = None

    def needles(self):
        """What a line must contain for its record to match, as groups of byte strings
        (one of each group): a test that costs no JSON decoding, necessary, not
        sufficient - matches() decides."""
        groups = []
        verdicts = (self.verdict,) if self.verdict else VERDICTS
        if self.cls is not None:
            groups.append(tuple(f'"tusk:{v}:{self.cls}"'.encode() for v in verdicts))
        elif self.verdict:
            groups.append((f'"tusk:{self.verdict}:'.encode(),))
        if self.port is not None:
            groups.append((f'_port": {self.port},'.encode(), f'_port": {self.port}}}'.encode()))
        if self.protocol is not None:
            groups.append((f'"ip.protocol": {self.protocol},'.encode(),
                           f'"ip.protocol": {self.protocol}}}'.encode()))
        if self.interfaces is not None:
            groups.append(tuple(f'"{name}"'.encode() for name in self.interfaces))
        start = self.address is not None and _address_start(self.address)
        if start:
            groups.append((start.encode(),))
        return groups

    def candidate(self):
        """line (bytes) -> whether its record may match (needles())."""
        groups = self.needles()
        return lambda line: all(any(needle in line for needle in group) for group in groups)

    def matches(self, record):
        if self.since is not None and record.time < self.since:
            return False
        if self.until is not None and record.time > self.until:
            return False
        if self.cls is not None and record.cls != self.cls:
            return False
        if self.verdict is not None and record.verdict != self.verdict:
            return False
        if self.interfaces is not None and not (
                {record.interface_in, record.interface_out} & self.interfaces):
            return False
        if self.protocol is not None and record.protocol != self.protocol:
            return False
        if self.port is not None and self.port not in (record.source_port,
                                                      record.destination_port):
            return False
        return self.address is None or any(_within(text, self.address) for text in (
            record.source, record.destination))


def _address_start(network):
    """How the text of every address of network starts, quoted as in a record ('"10.1.'
    for 10.1.0.0/16), or None when no text is common to all. IPv6 text is compressed
    (RFC 5952): only prefix hextets that are not zero are sure to be written out."""
    if network.num_addresses == 1:
        return f'"{network.network_address}"'
    if network.version == 4:
        octets = str(network.network_address).split(".")[:network.prefixlen // 8]
        return f'"{".".join(octets)}.' if octets else None
    hextets = [int(h, 16) for h in network.exploded.split("/")[0].split(":")]
    hextets = hextets[:network.prefixlen // 16]
    if not hextets or 0 in hextets:
        return None
    return '"' + ":".join(f"{h:x}" for h in hextets) + ":"


def _within(text, network):
    try:
        return ipaddress.ip_address(text) in network
    except ValueError:
        return False
