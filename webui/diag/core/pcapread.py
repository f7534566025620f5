"""Reading pcap and pcapng files into (time, interface, frame) records.

The file formats' definitions are dpkt's: pcap magics and headers, pcapng's
section, interface and packet blocks with their options (interface names,
timestamp resolution and offset). dpkt's own pcapng Reader keeps only the first
interface and drops each packet's interface id, and neither of its readers bounds
a record's claimed length; both matter here (a capture of both sides of the
firewall is one pcapng with two interfaces; a corrupt length must not make us read
a whole file into memory). So this module walks the blocks itself, parses the rare
blocks (SHB, IDB, obsolete PB) with dpkt's classes and, for speed, takes the five
fixed fields of an Enhanced Packet Block and of a pcap record header with one
struct call each (tests/diag check them against dpkt's readers).

A damaged file is read up to the damage: the records before it are returned and
`Reader.damage` says where and why reading stopped (a partial report, not a crash).
"""
import struct

import dpkt
from dpkt import pcap, pcapng

MAX_RECORD = 262144          # the largest snap length libpcap writes
MAX_BLOCK = MAX_RECORD + 65536  # a packet block with room for its options


class CaptureError(Exception):
    """The file cannot be read at all (not pcap/pcapng, or its header is broken)."""


class Interface:
    __slots__ = ("name", "linktype", "divisor", "offset")

    def __init__(self, name, linktype, divisor=1e6, offset=0):
        self.name, self.linktype, self.divisor, self.offset = name, linktype, divisor, offset

    def __repr__(self):
        return f"Interface({self.name!r}, linktype={self.linktype})"


_PCAP_MAGICS = {  # magic as read little-endian -> (byte order, divisor)
    pcap.TCPDUMP_MAGIC: ("<", 1e6), pcap.TCPDUMP_MAGIC_NANO: ("<", 1e9),
    pcap.MODPCAP_MAGIC: ("<", 1e6),
    pcap.PMUDPCT_MAGIC: (">", 1e6), pcap.PMUDPCT_MAGIC_NANO: (">", 1e9),
}
_SHB = pcapng.PCAPNG_BT_SHB
# what dpkt raises on a malformed block or option list
_BAD = (dpkt.Error, struct.error, ValueError, IndexError, TypeError)


class Reader:
    """for ts, interface_index, frame in Reader(path): ... ; reader.interfaces[i] is
    an Interface. Indices count interfaces across all sections of a pcapng file."""

    def __init__(self, path, name=None):
        self.path = path
        self.name = name or str(path)
        self.interfaces = []
        self.records = 0
        self.damage = None       # why reading stopped early, or None
        self._file = open(path, "rb")
        head = self._file.read(4)
        if len(head) < 4:
            self._file.close()
            raise CaptureError(f"{self.name}: empty or too short to be a capture "
                               f"({len(head)} bytes)")
        magic = struct.unpack("<I", head)[0]
        if magic == _SHB:
            self.format = "pcapng"
            self._records = self._pcapng(head)
        elif magic in _PCAP_MAGICS:
            self.format = "pcap"
            self._records = self._pcap(head, magic)
        else:
            self._file.close()
            raise CaptureError(f"{self.name}: not a pcap or pcapng file (it starts with "
                               f"{head.hex()})")

    def close(self):
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()

    def __iter__(self):
        return self._records

    def _stop(self, offset, why):
        self.damage = f"{self.name}: stopped at byte {offset}: {why}"

    # -- classic pcap ----------------------------------------------------------------

    def _pcap(self, head, magic):
        order, divisor = _PCAP_MAGICS[magic]
        rest = self._file.read(20)
        if len(rest) < 20:
            self._file.close()
            raise CaptureError(f"{self.name}: pcap file header cut short")
        header = (pcap.LEFileHdr if order == "<" else pcap.FileHdr)(head + rest)
        self.interfaces.append(Interface(None, header.linktype, divisor))
        return self._pcap_records(order, divisor)

    def _pcap_records(self, order, divisor):
        read, unpack = self._file.read, struct.Struct(order + "IIII").unpack
        offset = 24
        try:
            while True:
                record = read(16)
                if len(record) < 16:
                    if record:
                        self._stop(offset, f"record header cut short ({len(record)} of 16 bytes)")
                    return
                sec, frac, caplen, _ = unpack(record)
                if caplen > MAX_RECORD:
                    self._stop(offset, f"record claims {caplen} bytes, more than any "
                                       f"capture holds ({MAX_RECORD}): the file is damaged")
                    return
                frame = read(caplen)
                if len(frame) < caplen:
                    self._stop(offset, f"last packet cut short ({len(frame)} of {caplen} bytes)")
                    return
                offset += 16 + caplen
                self.records += 1
                yield sec + frac / divisor, 0, frame
        finally:
            self._file.close()

    # -- pcapng ----------------------------------------------------------------------

    def _pcapng(self, head):
        return self._pcapng_blocks(head)

    def _pcapng_blocks(self, head):  # noqa: C901 - one branch per block type, on the hot path
        read = self._file.read
        offset, order, section = 0, None, []   # section: interface indices of this section
        epb = None
        try:
            while True:
                start = head if offset == 0 else read(4)
                if len(start) < 4:
                    if start:
                        self._stop(offset, "block header cut short")
                    return
                if struct.unpack("<I", start)[0] == _SHB:   # a section: byte order anew
                    more = read(8)
                    if len(more) < 8:
                        self._stop(offset, "section header cut short")
                        return
                    bom = more[4:8]
                    if bom == b"\x4d\x3c\x2b\x1a":
                        order = "<"
                    elif bom == b"\x1a\x2b\x3c\x4d":
                        order = ">"
                    else:
                        self._stop(offset, f"section header has no byte-order magic "
                                           f"({bom.hex()})")
                        return
                    length = struct.unpack(order + "I", more[:4])[0]
                    header = start + more
                    epb = struct.Struct(order + "IIIII").unpack_from
                else:
                    if order is None:  # cannot happen: the first block was an SHB
                        self._stop(offset, "no section header")
                        return
                    more = read(4)
                    if len(more) < 4:
                        self._stop(offset, "block header cut short")
                        return
                    header = start + more
                    length = struct.unpack(order + "I", more)[0]
                if length < 12 or length % 4 or length > MAX_BLOCK:
                    self._stop(offset, f"block of impossible length {length}")
                    return
                block = header + read(length - len(header))
                if len(block) < length:
                    self._stop(offset, f"last block cut short ({len(block)} of {length} bytes)")
                    return
                btype = struct.unpack_from(order + "I", block)[0]
                if block[-4:] != block[4:8]:
                    self._stop(offset, "block's trailing length does not match its header")
                    return
                offset += length
                if btype == pcapng.PCAPNG_BT_EPB:
                    iface, high, low, caplen, _ = epb(block, 8)
                    if caplen > length - 32 or iface >= len(section):
                        self._stop(offset - length, "packet block with a bad captured length or "
                                                    "an undeclared interface")
                        return
                    index = section[iface]
                    interface = self.interfaces[index]
                    self.records += 1
                    yield (interface.offset + ((high << 32) | low) / interface.divisor, index,
                           block[28:28 + caplen])
                elif btype == _SHB:
                    try:
                        (pcapng.SectionHeaderBlockLE if order == "<"
                         else pcapng.SectionHeaderBlock)(block)
                    except _BAD as exc:
                        self._stop(offset - length, f"bad section header: {exc}")
                        return
                    section = []
                elif btype == pcapng.PCAPNG_BT_IDB:
                    try:
                        idb = (pcapng.InterfaceDescriptionBlockLE if order == "<"
                               else pcapng.InterfaceDescriptionBlock)(block)
                    except _BAD as exc:
                        self._stop(offset - length, f"bad interface description: {exc}")
                        return
                    section.append(len(self.interfaces))
                    self.interfaces.append(_interface(idb, order))
                elif btype == pcapng.PCAPNG_BT_PB:  # obsolete Packet Block
                    try:
                        pb = (pcapng.PacketBlockLE if order == "<" else pcapng.PacketBlock)(block)
                    except _BAD as exc:
                        self._stop(offset - length, f"bad packet block: {exc}")
                        return
                    if pb.iface_id >= len(section):
                        self._stop(offset - length, "packet block of an undeclared interface")
                        return
                    index = section[pb.iface_id]
                    interface = self.interfaces[index]
                    self.records += 1
                    yield (interface.offset + ((pb.ts_high << 32) | pb.ts_low) / interface.divisor,
                           index, pb.pkt_data)
                # other blocks (statistics, name resolution, simple packets without an
                # interface or time, custom) carry nothing this analysis uses
        finally:
            self._file.close()


def _interface(idb, order):
    name, divisor, tsoffset = None, 1e6, 0
    for opt in idb.opts:
        if opt.code == pcapng.PCAPNG_OPT_IF_NAME:
            name = opt.data.rstrip(b"\0").decode("utf-8", "replace")
        elif opt.code == pcapng.PCAPNG_OPT_IF_TSRESOL and opt.data:
            resol = opt.data[0]
            divisor = float((2 if resol & 0x80 else 10) ** (resol & 0x7f))
        elif opt.code == pcapng.PCAPNG_OPT_IF_TSOFFSET and len(opt.data) >= 8:
            tsoffset = struct.unpack(order + "q", opt.data[:8])[0]
    return Interface(name, idb.linktype, divisor or 1e6, tsoffset)
