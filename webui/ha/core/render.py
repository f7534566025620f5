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
import ipaddress
import os

from policy.core.render_boot import HA_SYNC_PORT
from tusklib.files import write_atomically

from .config import HaConfig

HEADER = "# Written by Tusk from ha.toml (webui/ha/core/render.py): edits are overwritten\n"
NOTIFY = "/usr/lib/tusk/ha-notify"     # rootfs-overlay: conntrackd's part of a role change
STATE_DIR = "/run/tusk/ha"             # the notify's record of the role; conntrackd's socket
SYNC_PORT = HA_SYNC_PORT   # the host table admits it from the peer
SYNC_GROUP = "tusk"
PROTOCOLS = ("TCP", "UDP", "SCTP", "ICMP", "IPv6-ICMP")
FILES = ("keepalived.conf", "conntrackd.conf")


def instance_name(interface, version):
    """A keepalived instance's name from its segment: letters, digits and _ only."""
    safe = "".join(c if c.isalnum() else "_" for c in interface)
    return f"tusk_{safe}_v{version}"


def instances(config: HaConfig):
    """[(name, interface, [addresses])] in the document's order, IPv4 before IPv6."""
    found = []
    for segment in config.virtual:
        for version in (4, 6):
            addresses = [a for a in segment.addresses
                         if ipaddress.ip_interface(a).version == version]
            if addresses:
                found.append((instance_name(segment.interface, version), segment.interface,
                              addresses))
    return found


def advert_seconds(advert_ms):
    text = f"{advert_ms / 1000:.2f}".rstrip("0").rstrip(".")
    return text or "0"


def keepalived_conf(config: HaConfig, state_dir=STATE_DIR, notify=NOTIFY, router_id=None):
    """The notify script (keepalived's notify_fifo_script) gets state_dir and
    conntrackd.conf's path there before the FIFO keepalived appends."""
    lines = [HEADER,
             "global_defs {",
             f"    router_id {router_id or 'tusk-' + config.role}",
             "    vrrp_version 3",
             "    enable_script_security",
             "    script_user root",
             # the events in order, to one notify process (rootfs-overlay's ha-notify)
             f"    notify_fifo {state_dir}/notify.fifo",
             f'    notify_fifo_script "{notify} {state_dir} {state_dir}/conntrackd.conf"',
             "}", "",
             f"vrrp_sync_group {SYNC_GROUP} {{",
             "    group {"]
    found = instances(config)
    lines += [f"        {name}" for name, _, _ in found]
    lines += ["    }", "}"]
    for name, interface, addresses in found:
        lines += ["",
                  f"vrrp_instance {name} {{",
                  "    state BACKUP",
                  f"    interface {interface}",
                  f"    virtual_router_id {config.vrid}",
                  f"    priority {config.priority}",
                  f"    advert_int {advert_seconds(config.advert_ms)}"]
        if not config.preempt:
            lines.append("    nopreempt")
        lines.append("    virtual_ipaddress {")
        lines += [f"        {address} dev {interface}" for address in addresses]
        lines += ["    }", "}"]
    return "\n".join(lines) + "\n"


def conntrackd_conf(config: HaConfig, state_dir=STATE_DIR, local_addresses=()):
    """local_addresses: the box's other own addresses (management, traffic ports), also
    ignored; the sync and virtual addresses are always."""
    family = config.family
    ignored = {"127.0.0.1", "::1", config.sync_ip}
    ignored.update(str(ipaddress.ip_interface(a).ip)
                   for segment in config.virtual for a in segment.addresses)
    ignored.update(str(ipaddress.ip_interface(a).ip) for a in local_addresses)
    ordered = sorted((ipaddress.ip_address(a) for a in ignored),
                     key=lambda ip: (ip.version, int(ip)))
    lines = [HEADER,
             "Sync {",
             "\tMode FTFW {",
             "\t\tDisableExternalCache on",
             "\t\tStartupResync on",
             "\t\tResendQueueSize 131072",
             "\t\tACKWindowSize 300",
             "\t}",
             "\tUDP {",
             f"\t\tIPv{family}_address {config.sync_ip}",
             f"\t\tIPv{family}_Destination_Address {config.peer_address}",
             f"\t\tPort {SYNC_PORT}",
             f"\t\tInterface {config.sync_interface}",
             "\t\tSndSocketBuffer 1249280",
             "\t\tRcvSocketBuffer 1249280",
             "\t\tChecksum on",
             "\t}",
             "\tOptions {",
             "\t\tTCPWindowTracking no",
             "\t}",
             "}", "",
             "General {",
             "\tHashSize 32768",
             "\tHashLimit 262144",
             "\tLogFile off",
             "\tSyslog on",
             f"\tLockFile {state_dir}/conntrackd.lock",
             "\tUNIX {",
             f"\t\tPath {state_dir}/conntrackd.ctl",
             "\t}",
             "\tNetlinkBufferSize 2097152",
             "\tNetlinkBufferSizeMaxGrowth 8388608",
             "\tNetlinkEventsReliable on",
             "\tFilter From Kernelspace {",
             "\t\tProtocol Accept {"]
    lines += [f"\t\t\t{protocol}" for protocol in PROTOCOLS]
    lines += ["\t\t}", "\t\tAddress Ignore {"]
    lines += [f"\t\t\tIPv{ip.version}_address {ip}" for ip in ordered]
    lines += ["\t\t}", "\t}", "}"]
    return "\n".join(lines) + "\n"



def write_files(config, state_dir=STATE_DIR, local_addresses=(), notify=NOTIFY):
    """Both daemons' files for config into state_dir, where they (their units on the
    appliance) find them; config None: none, and the role record goes too. A killed
    conntrackd's lock goes either way: it would refuse to start again."""
    os.makedirs(state_dir, mode=0o755, exist_ok=True)
    for name in (*FILES, "conntrackd.lock", *(() if config else ("state",))):
        if os.path.lexists(os.path.join(state_dir, name)):
            os.unlink(os.path.join(state_dir, name))
    if config is None:
        return
    write_atomically(os.path.join(state_dir, "keepalived.conf"),
                     keepalived_conf(config, state_dir, notify=notify), 0o600)
    write_atomically(os.path.join(state_dir, "conntrackd.conf"),
                     conntrackd_conf(config, state_dir, local_addresses), 0o600)
