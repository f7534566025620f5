"""Network pages: the Ethernet ports with their live facts, VLANs, bonds, routes (with
the kernel's live table) and the system settings, all in one draft; Review and apply with
the diff first; the commit-confirm panel; and the one-time link that confirms a change
of the management address over the new address."""

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_not_required
from django.db import transaction
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from accounts import audit
from accounts.audit import Actor
from accounts.roles import is_admin
from box import snapshot, verify
from commitkit.views import diff
from jobs import queue
from jobs.models import Job
from tusklib.problems import ServiceError

from . import draft as drafts
from . import services
from .core.applier import DHCP, confirm_over
from .core.errors import NetworkError
from .core.normalise import redacted, to_toml
from .forms import FORMS_BY_SECTION, ApplyForm, DiscardForm, PortForm, RoutingForm, SystemForm
from .models import ConfirmToken, NetworkState
from .services import sha256

SESSION_TOKEN = "network_confirm_token"
SESSION_OVER = "network_confirm_over"   # the addresses that token's change moves to
# nginx sets it to the local address the connection came in on ($server_addr), replacing
# whatever a client sent (rootfs-overlay/usr/lib/tusk/nginx.conf)
TITLES = {"vlans": ("VLANs", "VLAN"), "bonds": ("Bonds", "bond"),
          "bridges": ("Bridges", "bridge"), "routes": ("Routes", "route"),
          "neighbours": ("Routing", "BGP neighbour"), "ospf": ("Routing", "OSPF link")}
ROUTING_SECTIONS = ("neighbours", "ospf")   # listed on the Routing page


def status_context(draft=None):
    """What every network page shows: whether the draft differs from the confirmed
    configuration, and a pending change's countdown."""
    state = NetworkState.current()
    draft = draft or drafts.get()
    confirmed = drafts.confirmed_config()
    try:
        changes = confirmed is None or to_toml(drafts.check(draft.document)) != \
            to_toml(confirmed)
    except NetworkError:
        changes = True
    seconds_left = state.seconds_left(timezone.now()) if state else None
    return {"state": state, "draft": draft, "changes_pending": changes,
            "seconds_left": seconds_left}


def _version(request):
    try:
        return int(request.POST.get("version", ""))
    except ValueError:
        return -1


STALE = "The draft was changed by someone else after you opened this form. Reload it and " \
        "make your change again."


def _save(request, form, save, within, what):
    """Runs save() for a valid form; the problems go next to their fields. Returns the
    redirect after a save, or None (the form shows why)."""
    if not form.is_valid():
        return None
    try:
        save(form)
    except drafts.StaleDraft:
        form.add_error(None, STALE)
    except NetworkError as error:
        form.add_problems(error, within=within)
    else:
        audit.record(request, f"network {what}", within,
                     item=getattr(form, "audited", form.to_item)())
        messages.success(request, f"Saved {what} in the draft.")
        return True
    return None


# -- interfaces ---------------------------------------------------------------------------

def interfaces(request):
    """Every Ethernet port: the agent's live facts next to its configuration."""
    draft = drafts.get()
    facts = drafts.facts()
    live = facts.get("ports") or {}
    configured = {p["name"]: p for p in draft.document.get("interfaces") or []}
    bond_of = {m: b["name"] for key in ("bonds", "bridges")
               for b in draft.document.get(key) or [] for m in b.get("members") or []}
    ports = [{"name": name, "live": live.get(name), "config": configured.get(name),
              "bond": bond_of.get(name),
              "addresses": (facts.get("addresses") or {}).get(name, [])}
             for name in sorted(set(live) | set(configured))]
    return render(request, "network/interfaces.html", {
        **status_context(draft), "ports": ports, "facts_at": facts.get("at"),
        "facts_known": bool(facts)})


def _port(request):
    port = request.GET.get("port", "")
    if not port:
        raise Http404("which port? (?port=NAME)")
    return port


def interface_edit(request):
    if not request.GET.get("port"):
        return redirect("network")   # which port: the list to pick one from
    port = _port(request)
    draft = drafts.get()
    index = drafts.port_index(draft.document, port)
    if index is None and port not in (drafts.present() or {}):
        raise Http404("no such Ethernet port")
    item = draft.document["interfaces"][index] if index is not None else \
        {"name": port, "role": "unused"}
    initial = {"version": draft.version, **PortForm.initial_from(item)}
    form = PortForm(request.POST if request.method == "POST" else None, initial=initial)
    if request.method == "POST":
        position = len(draft.document.get("interfaces") or []) if index is None else index
        saved = _save(request, form, lambda f: drafts.save_item(
            "interfaces", index, {"name": port, **f.to_item()}, f.cleaned_data["version"],
            request.user), f"interfaces[{position}]", f"port {port}")
        if saved:
            return redirect("network")
    return render(request, "network/item_form.html", {
        "form": form, "title": "Interfaces", "back": reverse("network"), "name": port,
        "live": (drafts.facts().get("ports") or {}).get(port)},
        status=400 if form.errors else 200)


@require_POST
def interface_delete(request):
    """Forgets a port's configuration (a port the machine no longer has)."""
    port = _port(request)
    draft = drafts.get()
    index = drafts.port_index(draft.document, port)
    if index is None:
        raise Http404("no such configured port")
    _delete(request, "interfaces", index, port)
    return redirect("network")


def _delete(request, key, index, name):
    try:
        drafts.delete_item(key, index, _version(request), request.user)
    except drafts.StaleDraft:
        messages.error(request, "The draft was changed by someone else; nothing was deleted.")
    except NetworkError as error:
        messages.error(request, f"{name} was not deleted: " + "; ".join(
            str(p) for p in error.problems))
    else:
        audit.record(request, "network delete", f"{key}[{index}]", name=name)
        messages.success(request, f"Deleted {name} from the draft.")


# -- VLANs, bonds, routes -------------------------------------------------------------------

def _section(section):
    if section not in drafts.SECTIONS:
        raise Http404("no such network section")
    return section


def _form(section, data, document, initial, item=None):
    # every configured port is offered, so that the core says why one cannot be used
    # (the management port in a bond) rather than the form saying "not a valid choice"
    ports = [p["name"] for p in document.get("interfaces") or []]
    links = [link["name"] for key in drafts.LINKS for link in document.get(key) or []]
    bonds = [b["name"] for b in document.get("bonds") or []]
    vlans = [v["name"] for v in document.get("vlans") or []]
    kwargs = {"vlans": {"parents": ports + bonds}, "bonds": {"ports": ports},
              "bridges": {"links": ports + bonds + vlans}, "routes": {"links": links},
              "neighbours": {"had_password": bool((item or {}).get("password"))},
              "ospf": {"links": links}}[section]
    return FORMS_BY_SECTION[section](data, initial=initial, **kwargs)


def _list_url(section):
    return reverse("network_routing") if section in ROUTING_SECTIONS else \
        reverse("network_section", args=[section])


def section_list(request, section):
    _section(section)
    if section in ROUTING_SECTIONS:
        return redirect("network_routing")
    draft = drafts.get()
    context = {**status_context(draft), "section": section, "title": TITLES[section][0],
               "noun": TITLES[section][1],
               "items": list(enumerate(draft.document.get(section) or []))}
    if section == "routes":
        context["live_routes"] = drafts.facts().get("routes")
    return render(request, f"network/{section}.html", context)


def item_edit(request, section, index=None):
    _section(section)
    draft = drafts.get()
    entries = drafts.entries(draft.document, section)
    if index is not None and not 0 <= index < len(entries):
        raise Http404("no such item")
    cls = FORMS_BY_SECTION[section]
    initial = {"version": draft.version}
    if index is not None:
        initial.update(cls.initial_from(entries[index]))
    form = _form(section, request.POST if request.method == "POST" else None, draft.document,
                 initial, entries[index] if index is not None else None)
    noun = TITLES[section][1]
    if request.method == "POST":
        position = len(entries) if index is None else index
        saved = _save(request, form, lambda f: drafts.save_item(
            section, index, f.to_item(), f.cleaned_data["version"], request.user),
            f"{drafts.path_of(section)}[{position}]", noun)
        if saved:
            return redirect(_list_url(section))
    name = _item_name(entries[index]) if index is not None else f"new {noun}"
    return render(request, "network/item_form.html", {
        "form": form, "title": TITLES[section][0],
        "back": _list_url(section), "name": name,
        "bond_note": section == "bonds", "bridge_note": section == "bridges"},
        status=400 if form.errors else 200)


@require_POST
def item_delete(request, section, index):
    _section(section)
    entries = drafts.entries(drafts.get().document, section)
    if not 0 <= index < len(entries):
        raise Http404("no such item")
    _delete(request, section, index, _item_name(entries[index]))
    return redirect(_list_url(section))


def _item_name(entry):
    for key in ("name", "destination", "address", "interface"):
        if entry.get(key):
            return str(entry[key])
    return "item"


def routing(request):
    """BGP's and BFD's settings (a form), the BGP neighbours and OSPF links (items), and
    what FRR reports of its sessions."""
    draft = drafts.get()
    document = drafts.shown(draft.document)
    initial = {"version": draft.version,
               **RoutingForm.initial_from(document.get("routing") or {})}
    form = RoutingForm(request.POST if request.method == "POST" else None, initial=initial)
    if request.method == "POST":
        saved = _save(request, form, lambda f: drafts.save_routing(
            f.to_item(), f.cleaned_data["version"], request.user), "routing",
            "routing settings")
        if saved:
            return redirect("network_routing")
    return render(request, "network/routing.html", {
        **status_context(draft), "form": form,
        "neighbours": list(enumerate(drafts.entries(document, "neighbours"))),
        "ospf": list(enumerate(drafts.entries(document, "ospf"))),
        "live": drafts.routing_status()}, status=400 if form.errors else 200)


def system(request):
    draft = drafts.get()
    initial = {"version": draft.version, **SystemForm.initial_from(draft.document["system"])}
    form = SystemForm(request.POST if request.method == "POST" else None, initial=initial)
    if request.method == "POST":
        saved = _save(request, form, lambda f: drafts.save_system(
            f.to_item(), f.cleaned_data["version"], request.user), "system", "system settings")
        if saved:
            return redirect("network_system")
    return render(request, "network/system.html", {**status_context(draft), "form": form},
                  status=400 if form.errors else 200)


# -- review and apply -----------------------------------------------------------------------

def summary(old, new):
    """What applying new over old changes, in plain lines."""
    lines = []
    old_links = {link.name: link for link in old.links} if old else {}
    new_links = {link.name: link for link in new.links}
    for name in sorted(set(new_links) - set(old_links)):
        lines.append(f"link added: {name} ({new_links[name].kind})")
    for name in sorted(set(old_links) - set(new_links)):
        lines.append(f"link removed: {name} ({old_links[name].kind})")
    for name, link in sorted(new_links.items()):
        before = set(old_links[name].addresses) if name in old_links else set()
        lines += [f"address added: {a} on {name}" for a in sorted(set(link.addresses) - before)]
        lines += [f"address removed: {a} from {name}"
                  for a in sorted(before - set(link.addresses))]
    for name, link in sorted(old_links.items()):
        if name not in new_links:
            lines += [f"address removed: {a} from {name}" for a in link.addresses]

    def route(r):
        return f"{r.destination} via {r.gateway or '(link)'}" + \
            (f" dev {r.interface}" if r.interface else "") + f" metric {r.metric}"
    old_routes = {route(r) for r in old.routes} if old else set()
    new_routes = {route(r) for r in new.routes}
    lines += [f"route added: {r}" for r in sorted(new_routes - old_routes)]
    lines += [f"route removed: {r}" for r in sorted(old_routes - new_routes)]
    for key in ("hostname", "dns", "ntp", "timezone"):
        before = getattr(old.system, key) if old else None
        after = getattr(new.system, key)
        if before != after:
            show = ", ".join(after) if isinstance(after, tuple) else after
            lines.append(f"{key}: {show or '(none)'}")
    return lines


def mtu_warnings(config):
    """The MTU warnings of config along the paths of the policy the box runs and of the
    policy draft, which is applied next (box/verify.py)."""
    try:
        policies = snapshot.read(snapshot.WEB, "policy").values("policy")
    except snapshot.SnapshotError:
        return []   # warnings only: the policy's own page says what cannot be read
    return verify.mtu_warnings(config, policies)


def apply(request):
    """GET: the diff of the confirmed network.toml against the draft's, and what moves.
    POST: queue network.apply (with a one-time link when the management address moves)."""
    draft = drafts.get()
    state = NetworkState.current()
    form = ApplyForm(request.POST or None, initial={"version": draft.version})
    problems, config, over = [], None, []
    try:
        config = drafts.check(draft.document)
    except NetworkError as error:
        problems = error.problems
    confirmed = drafts.confirmed_config()
    if config is not None:
        over = confirm_over(confirmed, config)
    if request.method == "POST" and form.is_valid() and config is not None:
        try:
            applied = services.apply_draft(Actor.of(request), form.cleaned_data["version"],
                                           form.cleaned_data["timeout"])
        except ServiceError:
            form.add_error(None, "The draft changed since this diff was shown; review it again.")
        else:
            job = applied.queued.job
            if applied.over:   # the status page, which knows where the browser goes next
                request.session[SESSION_TOKEN] = applied.token
                request.session[SESSION_OVER] = applied.over
                return redirect(reverse("network_status") + f"?job={job}")
            return redirect(reverse("job", args=[job]) + "?next=network_status")
    old_text = state.confirmed_text if state else ""
    return render(request, "network/apply.html", {
        **status_context(draft), "form": form, "problems": problems,
        "discard_form": DiscardForm(initial={"version": draft.version}),
        "diff": diff(redacted(old_text), redacted(to_toml(config)), "confirmed network.toml",
                      f"draft version {draft.version}") if config else "",
        "summary": summary(confirmed, config) if config else [],
        "mtu_warnings": mtu_warnings(config) if config else [],
        "over": [a for a in over if a != DHCP], "over_dhcp": DHCP in over},
        status=400 if (form.errors or problems) and request.method == "POST" else 200)


@require_POST
def discard(request):
    """The draft thrown away, back to the configuration in effect."""
    form = DiscardForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Nothing discarded: the form was incomplete.")
        return redirect("network_apply")
    try:
        services.discard_draft(Actor.of(request), form.cleaned_data["version"])
    except ServiceError:
        messages.error(request, "Nothing discarded: the draft changed since it was shown; "
                                "review it again.")
        return redirect("network_apply")
    messages.success(request, "The draft is the configuration in effect again.")
    return redirect("network")


def _host(address):
    return f"[{address}]" if ":" in address else address


def confirm_urls(token, over):
    """The one-time links at the new static management addresses. Always https on the
    default port, which is what the appliance serves there, whatever listener this request
    came to (the lab's loopback one is plain http on another port)."""
    path = reverse("network_confirm")
    return [f"https://{_host(address)}{path}?token={token}"
            for address in over if address != DHCP]


def new_urls(request, state):
    """The one-time links at the new management addresses, for the operator who applied
    (the token is in this session only); [] for anyone else."""
    token = request.session.get(SESSION_TOKEN)
    if not (state and state.pending and state.confirm_over and token and
            state.token_sha256 and sha256(token) == state.token_sha256):
        return []
    return confirm_urls(token, state.confirm_over)


def _moving(request):
    """The network.apply job of ?job= when this session queued it to move the management
    address (its token is in the session), else None."""
    token = request.session.get(SESSION_TOKEN)
    pk = request.GET.get("job", "")
    if not (token and pk.isascii() and pk.isdigit() and len(pk) < 19):  # "²", 5000 digits
        return None
    job = Job.objects.filter(pk=int(pk), kind="network.apply",
                             created_by=request.user).first()
    if job is None or job.args.get("token_hash") != sha256(token):
        return None
    return job


def status(request):
    """The commit-confirm panel. For the operator who moved the management address: the
    new address's link, and the browser sent there - by htmx when the job or the pending
    change is seen, by network-move.js when the old address stops answering."""
    context = status_context()
    state = context["state"]
    job = _moving(request)
    over = request.session.get(SESSION_OVER, []) if job else \
        (state.confirm_over or []) if state and state.pending else []
    urls = confirm_urls(request.session[SESSION_TOKEN], over) if job else \
        new_urls(request, state)
    token = request.session.get(SESSION_TOKEN) if urls or over else None
    response = render(request, "network/status.html", {
        **context, "job": job, "urls": urls, "confirm_path": reverse("network_confirm"),
        "token": token, "over_dhcp": DHCP in over})
    done = job.state == Job.State.SUCCEEDED if job else bool(state and state.pending)
    if urls and done and request.headers.get("HX-Request"):
        response["HX-Redirect"] = urls[0]   # another origin: a full navigation
    return response


NO_ARRIVAL = ("This change moves the management address, and it is confirmed only by a "
              "request that arrives over the new address. This server cannot tell which "
              "address the request came in on (nginx passes it in X-Tusk-Local-Addr; the "
              "development server does not), so it cannot confirm it.")


@require_POST
def confirm(request):
    """The panel's Confirm button."""
    try:
        queued = services.confirm(Actor.of(request), audit.local_address(request))
    except ServiceError:
        messages.error(request, NO_ARRIVAL)
        return redirect("network_status")
    return redirect(reverse("job", args=[queued.job]) + "?next=network_status")


def _usable(token):
    """The token's row when it is good for a confirm: unused, not expired, its user an
    active admin; else None."""
    if not isinstance(token, str) or not 20 <= len(token) <= 100:
        return None
    row = ConfirmToken.objects.select_related("user").filter(
        token_sha256=sha256(token), used_at__isnull=True, expires__gt=timezone.now()).first()
    if row is None or not row.user.is_active or not is_admin(row.user):
        return None
    return row


@login_not_required
def confirm_link(request):
    """The one-time link at the new management address. GET: a Confirm button (a GET
    changes nothing: link previews and prefetching must not confirm). POST: the token
    proves who applied the change; it signs that user in here (a new origin has no
    session yet) and queues the confirm with the address the request arrived at."""
    token = request.POST.get("token") if request.method == "POST" else \
        request.GET.get("token")
    state = NetworkState.current()
    arrived = audit.local_address(request)
    problem = None
    if _usable(token) is None:
        problem = "This confirmation link is not valid: it was used already, it expired, " \
                  "or it is not one this box gave out."
    elif arrived is None:
        problem = NO_ARRIVAL
    if request.method == "POST" and problem is None:
        with transaction.atomic():
            used = ConfirmToken.objects.select_for_update().filter(
                token_sha256=sha256(token), used_at__isnull=True,
                expires__gt=timezone.now()).first()
            if used is not None:
                used.used_at = timezone.now()
                used.save(update_fields=["used_at"])
        if used is None:
            problem = "This confirmation link was used already."
        else:
            login(request, used.user, backend="django.contrib.auth.backends.ModelBackend")
            job = queue.enqueue("network.confirm", {"arrived_at": arrived, "token": token},
                                used.user)
            audit.record(request, "network confirm", "new management address", job=job.pk,
                         arrived_at=arrived)
            return redirect(reverse("job", args=[job.pk]) + "?next=network_status")
    return render(request, "network/confirm.html", {
        "token": token if problem is None else "", "problem": problem, "state": state,
        "arrived": arrived}, status=400 if problem and request.method == "POST" else 200)
