"""Live flows in the agent: the conntrack settings the sampler needs (at start), the
sample itself (every sample_interval, in the agent's target: the lab's namespace or the
box), and the two jobs of the Flows page.

flows.capture captures one connection on both sides of the firewall with the
Diagnostics page's own machinery (a Capture row, diag's capture and, for Diagnose, its
analysis). The job's row names the connection; the agent checks it with the form's own
code (core/flowref.py), finds the entry in the kernel by its tuple and compares the
id, and takes everything else - the filter's tuples before and after translation, the
interfaces - from the kernel's entry and routes, never from the row.

flows.drop deletes the entry, again only if the kernel's entry under that tuple still
has the id the row names (the kernel compares).

flows.hook is the IDS hook's block or bypass (core/hook.py): the row's arguments checked
again with the API's own check, the entry put into table inet tusk_hook's set with its
time to live; the table is made first when missing, its bypass flowtable over every
interface of the confirmed policy's zones - from root's store, never a row - when the
kernel has flowtables.
"""
import json

from box import blackhole, snapshot
from box.appliers import NetworkApplier
from diag import agent_jobs as diag_jobs
from diag.core import capture as diag_capture
from diag.models import Capture
from jobs.registry import JobFailed, handler, on_start, periodic
from network.core.errors import NetworkError
from policy.core import capabilities
from tusklib import contracts
from tusklib.target import Target, TargetError
from tusklib.values import InterfaceName, Refused

from . import export_jobs  # noqa: F401  (flow export's tasks: registered on import)
from .contracts import FlowSample, SysctlChange
from .core import ctnetlink, flowref, hook
from .core.conntrack import Conntrack
from .core.sampler import Sampler

SAMPLE = "flows.sample"
HOOK = "flows.hook"
BLACKHOLES = "flows.blackholes"
CAPTURE, DROP = "flows.capture", "flows.drop"
# What Live flows needs of conntrack: byte counters and start times on every entry
# (each takes effect for entries made from then on; the appliance sets them at boot,
# rootfs-overlay/usr/lib/sysctl.d)
SYSCTLS = {"net.netfilter.nf_conntrack_acct": "1", "net.netfilter.nf_conntrack_timestamp": "1"}
TCP_LOOSE = "net.netfilter.nf_conntrack_tcp_loose"
FLOW_PACKETS = 1_000_000    # a flow's capture: packets and MB at most (within the quota)
FLOW_MB = 200
SNAPLEN = 256               # every header, for the health report

_sampler = None


@on_start("flows.conntrack", contract=dict[str, SysctlChange])
def conntrack_accounting(agent):
    """Byte counters and timestamps on in the target: {sysctl: {was, now}}."""
    netns, changed = agent.config.netns or None, {}
    for name, value in SYSCTLS.items():
        was = ctnetlink.sysctl(netns, name)
        now = ctnetlink.sysctl(netns, name, value) if was != value else was
        changed[name] = {"was": was, "now": now}
    return changed


@periodic(SAMPLE, lambda config: config.sample_interval, contract=FlowSample)
def sample(agent):
    """The fastest flows and the table's totals (core/sampler.py), kept as this task's
    result for the page. A sampler that failed is made anew at the next run (the lab's
    namespace may have been made again meanwhile)."""
    global _sampler
    if _sampler is None:
        _sampler = Sampler(agent.config.netns or None, agent.config.sample_interval)
    try:
        return _sampler.sample()
    except OSError:
        _sampler.close()
        _sampler = None
        raise


def _checked(check, args):
    try:
        return check(args)
    except (flowref.FlowError, hook.HookError) as error:
        raise JobFailed(f"{error}; nothing done", result={"problems": [
            {"code": p.code.name, "path": p.path, "message": p.message}
            for p in error.problems]}) from None


def _entry(netns, ref):
    """The kernel's entry of the connection ref names, or JobFailed."""
    with Conntrack(netns) as conntrack:
        entry = conntrack.get(ref.family, ref.orig, ref.zone)
    if entry is None or entry.id != ref.id:
        raise JobFailed(f"{ref}: no such connection now (it ended, or its tuple belongs to "
                        "another connection since): nothing done")
    return entry


def _route(target, address):
    """The interface the target routes address through, or None (a local address)."""
    result = target.run(["ip", "-j", "route", "get", address])
    if not result.ok:
        raise JobFailed(f"no route to {address}: {result.stderr.strip()}")
    found = json.loads(result.stdout or "[]")
    device = found[0].get("dev") if found else None
    return None if device in (None, "lo") or found[0].get("type") == "local" else device


class _DiagRun:
    """What diag's capture and analysis handlers read of a Run, for this job's capture:
    they record progress, and the analysis its report, under this job."""

    def __init__(self, run, capture):
        self.job, self.config, self.agent, self.user = run.job, run.config, run.agent, run.user
        self.progress = run.progress
        self.args = {"capture": capture}


@handler(CAPTURE, "Capture a flow", long_running=True, abandoned=diag_jobs.capture_abandoned)
def capture(run):
    args = _checked(flowref.capture_args, run.args)
    ref, netns = args["flow"], run.config.netns or None
    entry = _entry(netns, ref)
    target = Target(netns)
    # a bridged connection: the ports of its class's zones (no route leads to them);
    # a routed one: ingress towards the original source, egress towards where the reply
    # comes from (the destination after translation)
    interfaces = tuple(map(str, flowref.bridged_ports(_loaded_policy(run.config),
                                                      entry.mark or 0)))
    if not interfaces:
        sides = [_route(target, entry.orig.src), _route(target, entry.reply.src)]
        interfaces = tuple(dict.fromkeys(side for side in sides if side))
    if not interfaces:
        raise JobFailed(f"{ref}: both ends are the firewall's own addresses: the connection "
                        "does not cross it")
    spec = diag_capture.Spec(
        interfaces=interfaces, filter=flowref.capture_filter(entry), max_packets=FLOW_PACKETS,
        max_mb=min(FLOW_MB, run.config.capture_quota_mb), max_seconds=args["seconds"],
        snaplen=SNAPLEN)
    try:
        diag_capture.validate(spec, target.interfaces(), run.config.capture_quota_mb)
    except diag_capture.SpecError as error:
        raise JobFailed(f"{ref}: the capture cannot run: {error}") from None
    cap = Capture.objects.create(spec=spec.as_dict(), created_by=run.job.created_by, job=run.job)
    step = _DiagRun(run, cap.pk)
    captured = diag_jobs.capture(step)
    result = {"flow": ref.as_dict(), "capture": cap.pk, "interfaces": list(interfaces),
              "filter": spec.filter, "packets": captured["packets"], "bytes": captured["bytes"]}
    if args["analyze"]:
        run.progress(99, f"analysing {captured['packets']} packets")
        result["report"] = diag_jobs.analyze(step)["report"]
    return result


@handler(DROP, "Drop a connection", retry_safe=True)
def drop(run):
    ref, netns = _checked(flowref.drop_args, run.args)["flow"], run.config.netns or None
    entry = _entry(netns, ref)
    with Conntrack(netns) as conntrack:
        if not conntrack.delete(ref.family, ref.orig, ref.id, ref.zone):
            raise JobFailed(f"{ref}: the connection ended meanwhile: nothing done")
    loose = ctnetlink.sysctl(netns, TCP_LOOSE) != "0"
    return {"flow": ref.as_dict(), "dropped": str(ref),
            "bytes": list(entry.bytes) if entry.bytes else None, "tcp_loose": loose,
            "note": _after_drop(ref.proto, loose)}


def _after_drop(proto, loose):
    """What happens to a dropped connection's next packets."""
    if proto != 6:
        return "Its next packets start a new entry if the policy accepts them."
    if loose:
        return (f"The kernel takes up a TCP connection from any of its segments ({TCP_LOOSE} "
                "= 1): if the policy accepts it, it goes on as a new entry.")
    return ("Its next segments are not a SYN: the firewall drops them as invalid, and the "
            "connection stops.")


def _policies(config):
    """{CONFIRMED: document, PENDING: document} of root's store (what there is)."""
    return dict(snapshot.read(snapshot.AGENT, "policy", config=config).policy)


def _loaded_policy(config):
    """The policy document whose ruleset is loaded now (root's store): the pending
    revision while an apply waits for confirmation, the confirmed one otherwise - the
    revision whose class ordinals the ct marks carry."""
    try:
        found = _policies(config)
    except snapshot.SnapshotError as error:
        raise JobFailed(f"the connection's class cannot be known: {error}") from None
    document = found.get(snapshot.PENDING, found.get(snapshot.CONFIRMED))
    return document if isinstance(document, dict) else {}


def _zone_devices(config):
    """Every interface of the confirmed policy's zones (root's store), as InterfaceNames."""
    found = set()
    document = _policies(config).get(snapshot.CONFIRMED)
    if isinstance(document, dict):
        for zone in document.get("zones") or []:
            for name in (zone.get("interfaces") or []) if isinstance(zone, dict) else []:
                try:
                    found.add(InterfaceName(name))
                except Refused:
                    continue
    return sorted(found, key=str)


def _confirmed_network(config):
    try:
        return NetworkApplier(config.network_state_dir, netns=config.netns or None).confirmed()
    except NetworkError:
        return None


def _blackhole_frr(config, request):
    """FRR's vtysh runner, when the confirmed network has neighbours that take black-hole
    routes and FRR answers; JobFailed saying why not otherwise (nothing done yet)."""
    applier = NetworkApplier(config.network_state_dir, netns=config.netns or None)
    try:
        confirmed = applier.confirmed()
    except NetworkError as error:
        raise JobFailed(f"{request}: not announced: the network configuration cannot be "
                        f"read ({error.problems[0]}); nothing done") from None
    if not blackhole.takers(confirmed):
        raise JobFailed(f"{request}: not announced: no BGP neighbour takes black-hole routes "
                        "(Network -> Routing, a neighbour's blackhole); nothing done")
    runner = getattr(applier.backend, "frr", None)
    if runner is None or not applier.routing_status()["running"]:
        raise JobFailed(f"{request}: not announced: FRR is not running; nothing done")
    return runner.run


@periodic(BLACKHOLES, lambda config: max(5.0, config.sample_interval * 5),
          contract=contracts.NOTHING)
def expire_blackholes(agent):
    """Each announced black-hole route whose block is gone (its time ran out) withdrawn.
    Asks nothing of FRR or nftables on a box whose confirmed network has no black-hole
    neighbour (every box without routing: this runs on each of them)."""
    config = _confirmed_network(agent.config)
    if not blackhole.takers(config):
        return None
    applier = NetworkApplier(agent.config.network_state_dir, netns=agent.config.netns or None)
    runner = getattr(applier.backend, "frr", None)
    if runner is None or not blackhole.announced(runner.run):
        return None
    listing = Target(agent.config.netns or None).run(["nft", "-j", "list", "table",
                                                      hook.FAMILY, hook.HOOK_TABLE])
    blackhole.expire(runner.run, listing.stdout if listing.ok else "", config)
    return None


@handler(HOOK, "Block or bypass for the IDS hook", retry_safe=True)
def hook_entry(run):
    request = _checked(hook.request_of, run.args)
    target = Target(run.config.netns or None)
    frr = _blackhole_frr(run.config, request) if request.announce else None
    flowtables = capabilities.flowtable_refusals(target, []) is None
    try:
        made = hook.add(target, request, _zone_devices(run.config) if flowtables else None)
    except TargetError as error:
        raise JobFailed(f"{request}: nftables refused it: {error}") from None
    if frr is not None:
        try:
            blackhole.announce(frr, request.prefix)
        except blackhole.BlackholeError as error:
            hook.remove(target, request)       # nothing half-done: the block goes too
            raise JobFailed(f"{request}: not announced, so not blocked either: {error}") \
                from None
    return {"entry": request.as_dict(), "set": request.set_name, "table_made": made,
            "announced_to": blackhole.takers(_confirmed_network(run.config))
            if request.announce else [],
            "note": "" if flowtables or request.action == "block" else
            "this kernel has no flowtables: the connection stays on the slow path"}
