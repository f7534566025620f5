"""The service presets the policy editor offers (issue 40): the services research networks
and backup teams run, each with the ports its own documentation gives and the class
settings that suit an elephant. Plain data and two functions that turn a preset into
draft items; the policy engine checks what they make like anything typed by hand, and
nothing here is refused that an operator could type (a preset only fills things in).

The class a preset makes keeps Tusk's defaults, which are an elephant's: every TCP
option kept (window scaling, SACK and timestamps are what a long fat path needs), no
MSS clamp, and - a class that accepts TCP between routed zones - the fast path once a
connection has carried a megabyte (`fastpath: auto`, docs/POLICY.md). A preset says so
rather than writing the defaults out; `tcp` notes what differs for its service.
"""
from dataclasses import dataclass

from .errors import PolicyError
from .normalise import load_policy


@dataclass(frozen=True)
class Preset:
    key: str            # its address on the presets page
    title: str
    services: tuple     # service items (name, protocol, ports) as the policy writes them
    source: str         # where the ports come from
    note: str = ""      # what to know before using it
    tcp: str = "Tusk's defaults: options kept, no clamp, the fast path after 1 MB."
    both_ways: bool = False   # the service's own documentation opens it in both directions


def _tcp(name, *ports):
    return {"name": name, "protocol": "tcp", "ports": list(ports)}


def _udp(name, *ports):
    return {"name": name, "protocol": "udp", "ports": list(ports)}


PRESETS = (
    Preset("globus", "Globus Connect Server (v5)",
           (_tcp("globus-https", 443), _tcp("globus-data", "50000-51000")),
           "https://docs.globus.org/globus-connect-server/v5/#open-tcp-ports_section - "
           "inbound TCP 443 and 50000-51000, outbound TCP 50000-51000",
           note="The data channels open both ways: a class from the transfer nodes out, "
                "and one in. Leaving out 50000-51000 is the most common Globus "
                "misconfiguration.", both_ways=True),
    Preset("gridftp", "GridFTP",
           (_tcp("gridftp", 2811), _tcp("gridftp-data", "50000-51000")),
           "Globus Toolkit GridFTP admin guide, firewall section: control TCP 2811, data "
           "channels in GLOBUS_TCP_PORT_RANGE (50000-51000 by convention)",
           note="The data range is the server's GLOBUS_TCP_PORT_RANGE: change it if the "
                "server's differs.", both_ways=True),
    Preset("rsync", "rsync daemon", (_tcp("rsync", 873),),
           "IANA service name rsync, TCP 873 (rsync over SSH is the SSH preset)"),
    Preset("ssh", "SSH, SCP, SFTP - and rsync, ZFS or Btrfs send over SSH",
           (_tcp("ssh", 22),), "RFC 4253 section 4 and IANA: TCP 22",
           note="`zfs send | ssh` and `btrfs send | ssh` are single long SSH connections: "
                "an elephant of the SSH service."),
    Preset("nfs", "NFS version 4", (_tcp("nfs", 2049),),
           "RFC 7530 section 3.1: NFSv4 uses TCP 2049 alone (v3 needs rpcbind and "
           "mountd's dynamic ports: pin them on the server first)"),
    Preset("iscsi", "iSCSI", (_tcp("iscsi", 3260),), "RFC 7143 section 13.2: TCP 3260"),
    Preset("ceph", "Ceph",
           (_tcp("ceph-mon", 3300, 6789), _tcp("ceph-daemons", "6800-7300")),
           "Ceph network configuration reference: monitors TCP 3300 (msgr2) and 6789 "
           "(msgr1), OSD, MGR and MDS daemons TCP 6800-7300"),
    Preset("smb", "SMB / CIFS", (_tcp("smb", 445),), "MS-SMB2 section 2.1: TCP 445"),
    Preset("s3", "S3 and other object stores over HTTPS", (_tcp("https", 443),),
           "RFC 9110 and the S3 API: HTTPS on TCP 443"),
    Preset("perfsonar", "perfSONAR test ports",
           (_tcp("perfsonar-tcp", 443, 861, 862, 5000, 5001, 5101, 5201),
            _udp("perfsonar-udp", "8760-9960", "33434-33634")),
           "https://docs.perfsonar.net/manage_security.html: HTTPS 443 (pScheduler), OWAMP "
           "861 and TWAMP 862 control, iperf2 5001, iperf3 5201, nuttcp 5000 and 5101; "
           "UDP 8760-9960 for OWAMP/TWAMP tests and 33434-33634 for traceroute",
           note="Both ends of a test open connections: a class each way between the two "
                "measurement hosts.", both_ways=True),
    Preset("postgresql", "PostgreSQL streaming replication", (_tcp("postgresql", 5432),),
           "PostgreSQL documentation, runtime-config-connection: port 5432"),
    Preset("mysql", "MySQL / MariaDB replication", (_tcp("mysql", 3306),),
           "MySQL reference manual, port reference: classic protocol TCP 3306"),
)
BY_KEY = {preset.key: preset for preset in PRESETS}


def add_to(document, preset, class_name="", from_zone=None, to_zone=None):
    """A copy of document (a policy draft) with preset's services - those it has not: a
    service of the same protocol and ports, whatever its name, is used as it is (as a port
    forward's class reuses one, forward_class.py) - and, with a class name, a class
    accepting them from from_zone to to_zone (None: any), placed last. Returns
    (document, [what was added, as text]). The caller saves it whole through the policy
    engine (draft.save_document), which refuses a clash of names with every problem
    named."""
    try:
        known = load_policy(document).services
    except PolicyError:
        known = ()
    document = {**document, "services": list(document.get("services") or []),
                "classes": list(document.get("classes") or [])}
    names, added = [], []
    for service in preset.services:
        wanted = load_policy({"version": 1, "services": [service]}).services[0]
        same = next((s.name for s in known if (s.protocol, s.ports) ==
                     (wanted.protocol, wanted.ports)), None)
        if same is not None:
            names.append(same)
            continue
        document["services"].append(dict(service, comment=f"preset {preset.key}"))
        names.append(service["name"])
        added.append(f"service {service['name']}")
    if class_name:
        item = {"name": class_name, "services": names, "action": "accept",
                "comment": f"preset {preset.key}"}
        if from_zone:
            item["from"] = from_zone
        if to_zone:
            item["to"] = to_zone
        document["classes"].append(item)
        added.append(f"class {class_name}")
    return document, added
