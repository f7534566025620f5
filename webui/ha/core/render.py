"""The model -> keepalived.conf and conntrackd.conf (docs/HA.md): pure, deterministic text,
the same document giving the same bytes. Checked by the daemons themselves in the tests
(keepalived --config-test; conntrackd started on a sync link between two namespaces).

keepalived: VRRPv3, one instance per segment and address family (an instance carries one
family), all in one sync group so that every address moves together, each starting as
BACKUP so that priority alone elects (nopreempt needs that too). conntrackd: FTFW over
UDP on the dedicated link, the external cache disabled (the peer's entries go straight
into this kernel's table, so a takeover costs only VRRP's detection), reliable netlink
events, no state filter (it would drop the SYN-time events that carry seqrand's
offsets), the box's own addresses ignored (only forwarded connections are synced)."""
import os

from tusklib import values
from tusklib.files import write_atomically
from tusklib.formats import conntrackd, keepalived
from tusklib.names import CLUSTER_GROUP, HA_SYNC_PORT

from .config import PRIORITY, HaConfig

HEADER = "# Written by Tusk from ha.toml (webui/ha/core/render.py): edits are overwritten\n"
NOTIFY = "/usr/lib/tusk/ha-notify"     # rootfs-overlay: conntrackd's part of a role change
STATE_DIR = "/run/tusk/ha"             # the notify's record of the role; conntrackd's socket
SYNC_PORT = HA_SYNC_PORT   # the host table admits it from the peer
SYNC_GROUP = "tusk"
PROTOCOLS = ("TCP", "UDP", "SCTP", "ICMP", "IPv6-ICMP")
FILES = ("keepalived.conf", "conntrackd.conf")


class RenderRefused(ValueError):
    """A model value the daemon's file cannot hold as one value (a model built past
    config.validate(), which refuses those with the same format checks)."""


def _typed(kind, value, *args):
    try:
        return kind(value, *args)
    except values.Refused as refused:
        raise RenderRefused(f"{value!r:.60}: {refused}") from None


def instance_name(interface, version):
    """A keepalived instance's name from its segment: letters, digits and _ only."""
    safe = "".join(c if c.isascii() and c.isalnum() else "_" for c in str(interface))
    return values.Word(f"tusk_{safe}_v{version}")


def instances(config: HaConfig):
    """[(name, interface, [addresses])] in the document's order, IPv4 before IPv6: the
    name a Word, the interface an InterfaceName, the addresses IPInterfaces."""
    found = []
    for segment in config.virtual:
        interface = _typed(values.InterfaceName, segment.interface)
        typed = [_typed(values.IPInterface, a) for a in segment.addresses]
        for version in (4, 6):
            addresses = [a for a in typed if a.version == version]
            if addresses:
                found.append((instance_name(segment.interface, version), interface,
                              addresses))
    return found


def advert_seconds(advert_ms):
    text = f"{advert_ms / 1000:.2f}".rstrip("0").rstrip(".")
    return text or "0"


def keepalived_conf(config: HaConfig, state_dir=STATE_DIR, notify=NOTIFY, router_id=None):
    """The notify script (keepalived's notify_fifo_script) gets state_dir and
    conntrackd.conf's path there before the FIFO keepalived appends. Every value goes
    through keepalived's one quoting point (tusklib/formats/keepalived.py)."""
    word = keepalived.word
    state = values.FilePath(state_dir)
    router = values.Word(router_id or f"tusk-{_typed(values.Choice, config.role, PRIORITY)}")
    script = keepalived.quoted(values.FilePath(notify), state, state.join("conntrackd.conf"))
    lines = [HEADER,
             "global_defs {",
             f"    router_id {word(router)}",
             "    vrrp_version 3",
             "    enable_script_security",
             "    script_user root",
             # the events in order, to one notify process (rootfs-overlay's ha-notify)
             f"    notify_fifo {word(state.join('notify.fifo'))}",
             f"    notify_fifo_script {script}",
             "}", "",
             f"vrrp_sync_group {SYNC_GROUP} {{",
             "    group {"]
    found = instances(config)
    lines += [f"        {word(name)}" for name, _, _ in found]
    lines += ["    }", "}"]
    for name, interface, addresses in found:
        lines += ["",
                  f"vrrp_instance {word(name)} {{",
                  "    state BACKUP",
                  f"    interface {word(interface)}",
                  f"    virtual_router_id {word(_typed(values.Integer, config.vrid, 1, 255))}",
                  f"    priority {word(_typed(values.Integer, config.priority, 1, 254))}",
                  f"    advert_int {word(values.Word(advert_seconds(config.advert_ms)))}"]
        if not config.preempt:
            lines.append("    nopreempt")
        lines.append("    virtual_ipaddress {")
        lines += [f"        {word(address)} dev {word(interface)}" for address in addresses]
        lines += ["    }", "}"]
    return "\n".join(lines) + "\n"


# the end of the Sync section, after its transport's addresses: the transport's buffers
# and checksum, and no TCP window tracking of the synced entries
_SYNC_END = ("\t\tSndSocketBuffer 1249280", "\t\tRcvSocketBuffer 1249280", "\t\tChecksum on",
             "\t}", "\tOptions {", "\t\tTCPWindowTracking no", "\t}", "}", "")


def _ignored(*addresses):
    """conntrackd's Address Ignore list: the loopbacks and addresses, ordered."""
    ignored = {values.IPAddress("127.0.0.1"), values.IPAddress("::1"), *addresses}
    return sorted(ignored, key=lambda ip: (ip.version, int(ip.ip)))


def _general(state_dir, ignored):
    """conntrackd.conf's General section: its socket and lock in state_dir, reliable
    netlink events, the protocols synced, the addresses ignored."""
    state = values.FilePath(state_dir)
    lines = ["General {",
             "\tHashSize 32768",
             "\tHashLimit 262144",
             "\tLogFile off",
             "\tSyslog on",
             f"\tLockFile {conntrackd.path(state.join('conntrackd.lock'))}",
             "\tUNIX {",
             f"\t\tPath {conntrackd.path(state.join('conntrackd.ctl'))}",
             "\t}",
             "\tNetlinkBufferSize 2097152",
             "\tNetlinkBufferSizeMaxGrowth 8388608",
             "\tNetlinkEventsReliable on",
             "\tFilter From Kernelspace {",
             "\t\tProtocol Accept {"]
    lines += [f"\t\t\t{protocol}" for protocol in PROTOCOLS]
    lines += ["\t\t}", "\t\tAddress Ignore {"]
    lines += [f"\t\t\tIPv{ip.version}_address {conntrackd.address(ip)}" for ip in ignored]
    lines += ["\t\t}", "\t}", "}"]
    return lines


def conntrackd_conf(config: HaConfig, state_dir=STATE_DIR, local_addresses=()):
    """local_addresses: the box's other own addresses (management, traffic ports), also
    ignored; the sync and virtual addresses are always. Every value goes through
    conntrackd's one quoting point (tusklib/formats/conntrackd.py), which runs its
    lexer's rules on it."""
    sync = _typed(values.IPInterface, config.sync_address)
    peer = _typed(values.IPAddress, config.peer_address)
    family = sync.version
    ignored = _ignored(values.IPAddress(sync.ip), *(
        values.IPAddress(_typed(values.IPInterface, a).ip)
        for a in [*(a for segment in config.virtual for a in segment.addresses),
                  *local_addresses]))
    sync_interface = _typed(values.InterfaceName, config.sync_interface)
    lines = [HEADER,
             "Sync {",
             "\tMode FTFW {",
             "\t\tDisableExternalCache on",
             "\t\tStartupResync on",
             "\t\tResendQueueSize 131072",
             "\t\tACKWindowSize 300",
             "\t}",
             "\tUDP {",
             f"\t\tIPv{family}_address {conntrackd.address(values.IPAddress(sync.ip))}",
             f"\t\tIPv{family}_Destination_Address {conntrackd.address(peer)}",
             f"\t\tPort {conntrackd.number(SYNC_PORT)}",
             f"\t\tInterface {conntrackd.name(sync_interface)}",
             *_SYNC_END]
    return "\n".join(lines + _general(state_dir, ignored)) + "\n"


def conntrackd_cluster_conf(config: HaConfig, state_dir=STATE_DIR, local_addresses=(),
                            group=CLUSTER_GROUP):
    """conntrackd for one box of a cluster sharing the load (docs/SCALE.md): every box
    sends its connections' events once to a multicast group on the sync link (IPv4),
    and puts every other box's straight into its kernel table. NOTRACK, not FTFW:
    FTFW's receiver keeps one sequence for all senders and drops a message numbered
    before the last it took - with two or more senders interleaving, most of them
    (conntrack-tools' src/sync-ftfw.c); NOTRACK takes each message whatever its number.
    A lost message is not resent: the connection's next state change, or a box's
    StartupResync, carries it again."""
    sync = _typed(values.IPInterface, config.sync_address)
    if sync.version != 4:
        raise RenderRefused(f"{config.sync_address}: a cluster's sync link is IPv4 (conntrackd's "
                            "multicast group is)")
    multicast = _typed(values.IPAddress, group)
    interface = _typed(values.InterfaceName, config.sync_interface)
    ignored = _ignored(values.IPAddress(sync.ip), *(
        values.IPAddress(_typed(values.IPInterface, a).ip) for a in local_addresses))
    lines = [HEADER,
             "Sync {",
             "\tMode NOTRACK {",
             "\t\tDisableExternalCache on",
             "\t\tStartupResync on",
             "\t}",
             "\tMulticast {",
             f"\t\tIPv4_address {conntrackd.address(multicast)}",
             f"\t\tGroup {conntrackd.number(SYNC_PORT)}",
             f"\t\tIPv4_interface {conntrackd.address(values.IPAddress(sync.ip))}",
             f"\t\tInterface {conntrackd.name(interface)}",
             *_SYNC_END]
    return "\n".join(lines + _general(state_dir, ignored)) + "\n"


def write_files(config, state_dir=STATE_DIR, local_addresses=(), notify=NOTIFY):
    """Both daemons' files for config into state_dir, where they (their units on the
    appliance) find them; config None: none, and the role record goes too; a cluster's
    box: conntrackd's only (no keepalived: the units' conditions keep it off). A killed
    conntrackd's lock goes either way: it would refuse to start again."""
    os.makedirs(state_dir, mode=0o755, exist_ok=True)
    for name in (*FILES, "conntrackd.lock", *(() if config else ("state",))):
        if os.path.lexists(os.path.join(state_dir, name)):
            os.unlink(os.path.join(state_dir, name))
    if config is None:
        return
    if config.cluster:
        write_atomically(os.path.join(state_dir, "conntrackd.conf"),
                         conntrackd_cluster_conf(config, state_dir, local_addresses), 0o600)
        return
    write_atomically(os.path.join(state_dir, "keepalived.conf"),
                     keepalived_conf(config, state_dir, notify=notify), 0o600)
    write_atomically(os.path.join(state_dir, "conntrackd.conf"),
                     conntrackd_conf(config, state_dir, local_addresses), 0o600)
