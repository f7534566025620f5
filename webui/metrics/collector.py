"""The Prometheus collector behind /metrics. It reads what the agent keeps current in
PostgreSQL - the dashboard's latest statistics sample, the ruleset's counters
(CounterReading), its heartbeat, periodic tasks and jobs - and the capture directory's
size; the web process runs no nft and reads no /proc of the firewall's.

Every family is declared in FAMILIES (name, type, help, labels): the Metrics page and
docs/METRICS.md list them from there. The rows are the web user's to write, so each
value is taken only when it is a finite number (a forged row drops its sample, it never
breaks the exposition); label values are escaped by prometheus_client."""
import time
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Count
from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily

from dashboard import loss
from dashboard.models import Sample
from diag.files import Directory, UnsafeFile
from flows.agent_jobs import SAMPLE as FLOWS_SAMPLE
from flows.classes import class_names
from flows.contracts import FlowSample
from ha.agent_jobs import STATUS as HA_STATUS
from ha.contracts import HaStatus
from jobs import registry
from jobs.models import AgentHeartbeat, Job, PeriodicState
from network.contracts import Facts, RoutingStatus
from network.draft import FACTS, ROUTING
from policy.models import READING_PK, CounterReading, TargetState
from system.agent_jobs import CERTIFICATE_TASK, CertificateSeen
from tusklib.rowvalues import number

COUNTER, GAUGE = "counter", "gauge"


@dataclass(frozen=True)
class Family:
    name: str       # without a counter's _total, which prometheus_client appends
    kind: str
    help: str
    labels: tuple = ()

    @property
    def exposed(self):
        return f"{self.name}_total" if self.kind == COUNTER else self.name

    def make(self):
        cls = CounterMetricFamily if self.kind == COUNTER else GaugeMetricFamily
        return cls(self.name, self.help, labels=list(self.labels))


# {key in the dashboard sample's interface entry: (metric name part, what it counts)}
_INTERFACE = {
    "rx_bytes": ("receive_bytes", "Bytes received"),
    "tx_bytes": ("transmit_bytes", "Bytes sent"),
    "rx_packets": ("receive_packets", "Packets received"),
    "tx_packets": ("transmit_packets", "Packets sent"),
    "rx_errors": ("receive_errors", "Receive errors"),
    "tx_errors": ("transmit_errors", "Transmit errors"),
    "rx_dropped": ("receive_drops", "Packets dropped on receive"),
    "tx_dropped": ("transmit_drops", "Packets dropped on transmit"),
}
# the lines of /proc/net/nf_conntrack_seqadj (Tusk's kernel patches)
SEQADJ = {
    "sack_blocks_translated": ("tusk_seqadj_sack_blocks_translated",
                               "SACK blocks whose edges seqadj translated"),
    "tcp_options_malformed": ("tusk_seqadj_tcp_options_malformed",
                              "Segments whose TCP options seqadj stopped at as malformed"),
    "icmp_quotes_translated": ("tusk_seqadj_icmp_quotes_translated",
                               "TCP headers quoted in ICMP errors that seqadj translated"),
    "icmp_quotes_dropped": ("tusk_seqadj_icmp_quotes_dropped",
                            "ICMP errors seqadj dropped: the TCP segment they quote lies "
                            "outside the connection's window"),
    "flowtable_packets_translated": ("tusk_seqadj_flowtable_packets_translated",
                                     "Packets of connections with sequence adjustment that "
                                     "the flowtable fast path translated (a GSO packet "
                                     "once)"),
    "seqrand_initiator_randomised": ("tusk_seqrand_initiator_randomised",
                                     "Connections whose initiator's sequence numbers the "
                                     "seqrand helper randomised"),
    "seqrand_responder_randomised": ("tusk_seqrand_responder_randomised",
                                     "Connections whose responder's sequence numbers "
                                     "seqrand-bi randomised"),
    "seqrand_skipped_midstream": ("tusk_seqrand_skipped_midstream",
                                  "Connections seqrand left alone: picked up mid-stream"),
    "seqrand_skipped_synproxy": ("tusk_seqrand_skipped_synproxy",
                                 "Connections seqrand left alone: opened by synproxy"),
    "seqrand_skipped_signed": ("tusk_seqrand_skipped_signed",
                               "Connections seqrand left alone: signed with TCP-MD5 or "
                               "TCP-AO"),
    "seqrand_dropped_nomem": ("tusk_seqrand_dropped_nomem",
                              "SYNs seqrand dropped: no memory for the seqadj extension"),
}
DROP_COUNTERS = {"invalid": "invalid", "default_deny": "default_deny"}   # nft name: reason
JOB_STATES = [state.value for state in Job.State]

_FAMILIES = [
    *(Family(f"tusk_interface_{name}", COUNTER, f"{text} (the interface's kernel counter, "
             "in the dashboard's latest sample)", ("interface",))
      for name, text in _INTERFACE.values()),
    Family("tusk_interface_up", GAUGE, "1 if the interface's operational state is up",
           ("interface",)),
    Family("tusk_conntrack_entries", GAUGE, "Connections in the conntrack table"),
    Family("tusk_conntrack_entries_limit", GAUGE, "The conntrack table's limit "
           "(nf_conntrack_max)"),
    Family("tusk_seqadj_counters_available", GAUGE, "1 if the kernel has Tusk's seqadj and "
           "seqrand counters (/proc/net/nf_conntrack_seqadj)"),
    *(Family(name, COUNTER, text) for name, text in SEQADJ.values()),
    Family("tusk_loss_packets", COUNTER, "Packets lost at a stage of the loss path (the "
           "Loss page): the NIC's missed, FIFO, over and CRC counts, the kernel's receive "
           "and transmit drops, softnet's backlog and flow-limit drops and budget squeezes, "
           "conntrack's invalid, insert-failed and table-full drops, seqadj's, the root "
           "qdisc's; interface empty for the box's", ("stage", "interface")),
    Family("tusk_statistics_sample_timestamp_seconds", GAUGE, "When the agent took the "
           "statistics sample the interface, conntrack and seqadj values come from"),
    Family("tusk_class_packets", COUNTER, "Packets the traffic class's rule matched: each "
           "connection's first (the rest pass as established), every packet of a notrack "
           "class. Its named counter class_<name>, which every apply starts again from zero",
           ("class",)),
    Family("tusk_class_bytes", COUNTER, "Bytes the traffic class's rule matched", ("class",)),
    Family("tusk_class_last_hit_timestamp_seconds", GAUGE, "When the agent last saw the "
           "class's counter grow (absent: not seen since the agent started watching)",
           ("class",)),
    Family("tusk_class_elephant_connections", GAUGE, "Connections of the class that moved "
           "at least 1 MB (those fastpath auto promotes) and are still tracked, as the Flows "
           "sampler's last whole pass of the conntrack table found them", ("class",)),
    Family("tusk_class_elephant_bytes", GAUGE, "Their bytes so far, both directions "
           "(conntrack's accounting, which the flowtable's counter keeps current on the "
           "fast path)", ("class",)),
    Family("tusk_dropped_packets", COUNTER, "Packets the ruleset dropped: invalid conntrack "
           "state, or no class between zones (default deny)", ("reason",)),
    Family("tusk_dropped_bytes", COUNTER, "Bytes the ruleset dropped", ("reason",)),
    Family("tusk_ruleset_counters_read_timestamp_seconds", GAUGE, "When the agent last read "
           "the ruleset's counters"),
    Family("tusk_ruleset_loaded", GAUGE, "1 if table inet tusk is loaded"),
    Family("tusk_ruleset_unchanged", GAUGE, "1 if the live table is what Tusk loaded, 0 if "
           "it was changed outside Tusk"),
    Family("tusk_agent_heartbeat_age_seconds", GAUGE, "Seconds since the agent's last "
           "heartbeat"),
    Family("tusk_agent_start_time_seconds", GAUGE, "When the running agent started"),
    Family("tusk_agent_task_runs", COUNTER, "Runs of the agent's periodic task (or start-up "
           "hook) since the agent started", ("task",)),
    Family("tusk_agent_task_failures", COUNTER, "Failed runs of the agent's periodic task (or "
           "start-up hook) since the agent started", ("task",)),
    Family("tusk_agent_task_skipped", COUNTER, "Ticks of the periodic task skipped because "
           "a run overran its interval", ("task",)),
    Family("tusk_agent_task_failing", GAUGE, "1 if the task's last run failed", ("task",)),
    Family("tusk_agent_task_last_run_timestamp_seconds", GAUGE, "When the task last ran",
           ("task",)),
    Family("tusk_agent_task_last_duration_seconds", GAUGE, "How long the task's last run "
           "took", ("task",)),
    Family("tusk_jobs", GAUGE, "Jobs in each state (jobs are kept: succeeded and failed only "
           "grow)", ("state",)),
    Family("tusk_job_queue_wait_seconds", GAUGE, "How long the oldest queued job has waited "
           "to be taken (captures and analyses, which wait for a slot by design, aside)"),
    Family("tusk_capture_storage_used_bytes", GAUGE, "Bytes of capture files in the capture "
           "directory"),
    Family("tusk_capture_storage_quota_bytes", GAUGE, "The capture directory's quota"),
    Family("tusk_routing_running", GAUGE, "1 if FRR answers (BGP or OSPF applied)"),
    Family("tusk_bgp_session_up", GAUGE, "1 if the BGP session with the neighbour is "
           "Established", ("neighbour", "remote_as")),
    Family("tusk_bgp_session_up_seconds", GAUGE, "How long the session has been "
           "Established", ("neighbour",)),
    Family("tusk_bgp_prefixes_received", GAUGE, "Prefixes accepted from the neighbour (past "
           "its accept filter)", ("neighbour",)),
    Family("tusk_bgp_prefixes_sent", GAUGE, "Prefixes announced to the neighbour",
           ("neighbour",)),
    Family("tusk_bfd_peer_up", GAUGE, "1 if the BFD session with the peer is up", ("peer",)),
    Family("tusk_ospf_neighbour_full", GAUGE, "1 if the OSPF adjacency is Full",
           ("neighbour", "interface", "version")),
    Family("tusk_routing_read_timestamp_seconds", GAUGE, "When the agent last read FRR"),
    Family("tusk_routes", GAUGE, "Routes in the kernel's main table by who put them there "
           "(bgp, ospf, static, kernel, ...) and family, as the agent's network.facts "
           "task last read them", ("protocol", "family")),
    Family("tusk_ha_status_timestamp_seconds", GAUGE, "When the agent last read this box's "
           "HA state (absent: HA was never on)"),
    Family("tusk_ha_enabled", GAUGE, "1 if this box is half of an HA pair or one of a "
           "cluster (the tusk_ha_* below only then)"),
    Family("tusk_ha_master", GAUGE, "1 if keepalived made this box the pair's master, 0 if "
           "backup (absent: keepalived not running, or a cluster)"),
    Family("tusk_ha_daemon_running", GAUGE, "1 if the HA daemon runs", ("daemon",)),
    Family("tusk_ha_peer_reachable", GAUGE, "1 if the pair's other box answered on the "
           "peer channel"),
    Family("tusk_ha_peer_master", GAUGE, "1 if the other box says it is master (both 1: a "
           "split brain)"),
    Family("tusk_ha_sync_entries", GAUGE, "Connections in conntrackd's cache of this box"),
    Family("tusk_ha_sync_injected", COUNTER, "Connections the other boxes' sync created or "
           "updated in this kernel (conntrackd's count since it started)"),
    Family("tusk_ha_sync_errors", COUNTER, "conntrackd's sync errors since it started: "
           "messages lost (a pair's only) or malformed, send and receive errors, failed "
           "injections", ("kind",)),
    Family("tusk_certificate_expiry_timestamp_seconds", GAUGE, "When the TLS certificate "
           "the dashboard serves expires ([agent] tls_certificate)"),
    Family("tusk_certificate_readable", GAUGE, "1 if the agent could read the certificate's "
           "end date"),
]
FAMILIES = {family.name: family for family in _FAMILIES}


class _Families:
    """The families of one scrape, made on first use; collected in declaration order."""

    def __init__(self):
        self.made = {}

    def add(self, name, value, labels=()):
        value = number(value)
        if value is None:
            return
        if name not in self.made:
            self.made[name] = FAMILIES[name].make()
        self.made[name].add_metric(list(labels), value)

    def __iter__(self):
        return (self.made[name] for name in FAMILIES if name in self.made)


def _statistics(out):
    sample = Sample.objects.order_by("-taken").first()
    if sample is None:
        return
    out.add("tusk_statistics_sample_timestamp_seconds", sample.taken.timestamp())
    interfaces = sample.interfaces if isinstance(sample.interfaces, dict) else {}
    for interface, found in sorted(interfaces.items()):
        if not isinstance(found, dict):
            continue
        for key, (name, _) in _INTERFACE.items():
            out.add(f"tusk_interface_{name}", found.get(key), [interface])
        out.add("tusk_interface_up", int(found.get("operstate") == "UP"), [interface])
    out.add("tusk_conntrack_entries", sample.conntrack_count)
    out.add("tusk_conntrack_entries_limit", sample.conntrack_max)
    counted = sample.loss if isinstance(sample.loss, dict) else {}
    for key, value in sorted(counted.items()):
        where = loss.split(key)
        if where is not None:
            out.add("tusk_loss_packets", loss.whole(value), [where[0].key, where[1]])
    seqadj = sample.seqadj
    out.add("tusk_seqadj_counters_available", int(isinstance(seqadj, dict)))
    if isinstance(seqadj, dict):
        for line, (name, _) in SEQADJ.items():
            out.add(name, seqadj.get(line))


def _ruleset(out):
    reading = CounterReading.objects.filter(pk=READING_PK).first()
    if reading is not None:
        out.add("tusk_ruleset_counters_read_timestamp_seconds", reading.read_at.timestamp())
        counters = reading.counters if isinstance(reading.counters, dict) else {}
        for name, value in sorted(counters.items()):
            if not (isinstance(value, list) and len(value) == 3):
                continue
            packets, octets, last_hit = value
            if name in DROP_COUNTERS:
                out.add("tusk_dropped_packets", packets, [DROP_COUNTERS[name]])
                out.add("tusk_dropped_bytes", octets, [DROP_COUNTERS[name]])
            elif name.startswith("class_"):
                cls = name.removeprefix("class_")
                out.add("tusk_class_packets", packets, [cls])
                out.add("tusk_class_bytes", octets, [cls])
                out.add("tusk_class_last_hit_timestamp_seconds", last_hit, [cls])
    state = TargetState.objects.filter(pk=1).first()
    if state is not None and state.synced_at is not None:
        out.add("tusk_ruleset_loaded", int(state.table_loaded))
        if state.table_loaded and state.matches is not None:
            out.add("tusk_ruleset_unchanged", int(state.matches))


def _elephants(out):
    """Per class, the elephants of the Flows sampler's last whole pass (flows/core/
    sampler.py): labelled by the class's name in the revision loaded now."""
    found = PeriodicState.read(FLOWS_SAMPLE, FlowSample)
    last = found.pass_.last if found is not None else None
    classes = last.get("classes") if isinstance(last, dict) else None
    if not isinstance(classes, dict):
        return
    names = class_names()
    for ordinal, counted in sorted(classes.items()):
        name = (names.get(int(ordinal)) if ordinal.isascii() and ordinal.isdigit()
                and len(ordinal) < 7 else None)
        if not name or not isinstance(counted, list) or len(counted) != 2:
            continue
        out.add("tusk_class_elephant_connections", counted[0], [name])
        out.add("tusk_class_elephant_bytes", counted[1], [name])


def _routes(out):
    facts = PeriodicState.read(FACTS, Facts)
    if facts is None:
        return
    counted = {}
    for route in facts.routes:
        key = (route.protocol or "unknown", str(route.family))
        counted[key] = counted.get(key, 0) + 1
    for (protocol, family), count in sorted(counted.items()):
        out.add("tusk_routes", count, [protocol, family])


def _routing(out):
    """What the agent's network.routing task last read of FRR (network.contracts)."""
    found = PeriodicState.read(ROUTING, RoutingStatus)
    if found is None:
        return
    out.add("tusk_routing_running", int(found.running))
    out.add("tusk_routing_read_timestamp_seconds", found.at)
    for session in found.sessions:
        out.add("tusk_bgp_session_up", int(session.state == "Established"),
                [session.address, str(session.remote_as)])
        out.add("tusk_bgp_session_up_seconds", session.up_seconds, [session.address])
        out.add("tusk_bgp_prefixes_received", session.received, [session.address])
        out.add("tusk_bgp_prefixes_sent", session.sent, [session.address])
    for peer in found.bfd:
        out.add("tusk_bfd_peer_up", int(peer.status == "up"), [peer.peer])
    for neighbour in found.ospf:
        out.add("tusk_ospf_neighbour_full", int(neighbour.state == "Full"),
                [neighbour.neighbour, neighbour.interface, str(neighbour.version)])


def _agent(out, now):
    heartbeat = AgentHeartbeat.objects.first()
    if heartbeat is not None:
        out.add("tusk_agent_heartbeat_age_seconds", max(0.0, now - heartbeat.seen_at.timestamp()))
        out.add("tusk_agent_start_time_seconds", heartbeat.started_at.timestamp())
    for task in PeriodicState.objects.all():
        labels = [task.name]
        out.add("tusk_agent_task_runs", task.runs, labels)
        out.add("tusk_agent_task_failures", task.failures, labels)
        out.add("tusk_agent_task_skipped", task.skipped, labels)
        if task.started_at is not None:
            out.add("tusk_agent_task_failing", int(bool(task.error)), labels)
            out.add("tusk_agent_task_last_run_timestamp_seconds", task.started_at.timestamp(),
                    labels)
            out.add("tusk_agent_task_last_duration_seconds", task.duration, labels)


def _jobs(out, now):
    counts = dict(Job.objects.values_list("state").annotate(n=Count("id")).order_by())
    for state in JOB_STATES:
        out.add("tusk_jobs", counts.get(state, 0), [state])
    oldest = (Job.objects.filter(state=Job.State.QUEUED)
              .exclude(kind__in=registry.long_running_kinds())
              .order_by("created_at").values_list("created_at", flat=True).first())
    out.add("tusk_job_queue_wait_seconds", max(0.0, now - oldest.timestamp()) if oldest else 0)


def _ha(out):
    """This box's half of the pair (or cluster) as the agent's ha.status last read it."""
    found = PeriodicState.read(HA_STATUS, HaStatus)
    if found is None:
        return
    out.add("tusk_ha_status_timestamp_seconds", found.at)
    enabled = found.cluster or found.peer_address is not None
    out.add("tusk_ha_enabled", int(enabled))
    if not enabled:
        return
    if found.role in ("MASTER", "BACKUP") and not found.cluster:
        out.add("tusk_ha_master", int(found.role == "MASTER"))
    for daemon, running in sorted(found.running.items()):
        out.add("tusk_ha_daemon_running", int(bool(running)), [daemon])
    if not found.cluster:
        peer = found.peer
        out.add("tusk_ha_peer_reachable", int(peer is not None and peer.error is None
                                              and peer.role is not None))
        if peer is not None and peer.role in ("MASTER", "BACKUP"):
            out.add("tusk_ha_peer_master", int(peer.role == "MASTER"))
    stats = found.stats or {}
    out.add("tusk_ha_sync_entries", stats.get("entries"))
    out.add("tusk_ha_sync_injected", stats.get("injected"))
    kinds = ("malformed", "send_errors", "recv_errors", "inject_failures") + (
        () if found.cluster else ("lost",))     # "lost" means nothing on a multicast group
    for kind in kinds:
        out.add("tusk_ha_sync_errors", stats.get(kind), [kind])


def _certificate(out):
    found = PeriodicState.read(CERTIFICATE_TASK, CertificateSeen)
    if found is None:
        return
    out.add("tusk_certificate_readable", int(found.not_after is not None))
    out.add("tusk_certificate_expiry_timestamp_seconds", found.not_after)


def _captures(out):
    try:
        with Directory(settings.TUSK.capture_dir) as shared:
            used = sum(size for files in shared.listing().values() for _, size in files)
    except (UnsafeFile, OSError):
        used = None   # no such directory here: the quota alone
    out.add("tusk_capture_storage_used_bytes", used)
    out.add("tusk_capture_storage_quota_bytes", settings.TUSK.capture_quota_mb * 1_000_000)


class TuskCollector:
    """prometheus_client's custom collector: one pass over the database per scrape."""

    def collect(self):
        out, now = _Families(), time.time()
        _statistics(out)
        _ruleset(out)
        _elephants(out)
        _routing(out)
        _routes(out)
        _agent(out, now)
        _jobs(out, now)
        _captures(out)
        _ha(out)
        _certificate(out)
        return iter(out)


def scrape_registry():
    """A registry of the collector alone (not the web process's own metrics)."""
    found = CollectorRegistry(auto_describe=False)
    found.register(TuskCollector())
    return found
