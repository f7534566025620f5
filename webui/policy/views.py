"""Policy pages: the draft's items (zones, address sets, services, classes), apply with
the diff first, the commit-confirm countdown, revision history, import and export."""
import functools
import hashlib

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from accounts import audit
from accounts.audit import Actor
from accounts.roles import is_admin
from commitkit.views import diff, not_found
from tusklib.problems import ServiceError

from . import draft as drafts
from . import services
from .core import presets as catalogue
from .core.errors import PolicyError
from .core.normalise import load_policy
from .core.render import render as render_ruleset
from .forms import FORMS, TITLES, ApplyForm, ImportForm, PresetForm, fastpath_text
from .hits import ClassHits
from .matrix import shown_names, zone_matrix
from .models import TargetState
from .selectors import live_revision, seqrand_available


def _section(section):
    if section not in FORMS:
        raise Http404("no such policy section")
    return section


@functools.cache
def _empty_sha256():
    return hashlib.sha256(render_ruleset(load_policy(drafts.EMPTY)).encode()).hexdigest()


def status_context(draft=None):
    """What every policy page shows: pending changes, a pending revision's countdown.
    Reads no policy document or ruleset text, only their hashes."""
    state = TargetState.objects.filter(pk=1).first()
    draft = draft or drafts.get_meta()
    live = live_revision(state=state)
    live_hash = live.ruleset_sha256 if live else _empty_sha256()
    seconds_left = state.seconds_left(timezone.now()) if state else None
    return {"state": state, "draft": draft, "live": live, "seconds_left": seconds_left,
            "changes_pending": draft.ruleset_sha256 != live_hash}


def overview(request):
    draft, document = drafts.current()
    sections = [(s, TITLES[s][0], drafts.items(document, s)) for s in drafts.SECTIONS]
    zones, rows = zone_matrix(document)
    hits = ClassHits(shown_names(rows))
    matrix = [(source, [(to, [(index, name, action, hits.packets(name))
                              for index, name, action in cell.classes], cell.more)
                         for to, cell in zip(zones, cells)]) for source, cells in rows]
    return render(request, "policy/overview.html", {
        **status_context(draft), "sections": sections, "draft": draft, "zones": zones,
        "matrix": matrix, "hits_caption": hits.caption()})


PAGE_SIZE = 50


def _rows(section, items, base, admin, last, hits=None):
    """The list's rows as HTML, built here rather than in a template loop: Django's
    template engine made a page of 50 classes cost 20 ms (bench-ui). hits: the classes'
    counters (hits.ClassHits)."""
    rows = []
    for index, item in items:
        link = format_html('<a href="{}{}/">{}</a>', base, index, item.get("name", ""))
        if section == "classes":
            match = " ".join(part for part in (
                "src " + ", ".join(item["source"]) if item.get("source") else "",
                "dst " + ", ".join(item["destination"]) if item.get("destination") else "",
                "svc " + ", ".join(item["services"]) if item.get("services") else "") if part)
            mss = item.get("mss") or {}
            tcp = " ".join(part for part in (
                f"MSS {mss['mode']}" + (f" {mss['value']}" if "value" in mss else "")
                if mss else "",
                " ".join(f"{v} {k}" for k, v in (item.get("tcp_options") or {}).items()),
                f"seqrand {item['seqrand']}" if item.get("seqrand") else "") if part)
            fastpath = fastpath_text(item.get("fastpath"))
            after = item.get("fastpath_after")
            badges = format_html_join("", '<span class="badge">{}</span>', ((b,) for b, on in (
                (f"fast path {fastpath}", fastpath),
                (f"promoted after {after}", after is not None),
                ("hardware", item.get("hardware") is True),
                ("notrack", item.get("notrack")), ("log", item.get("log"))) if on))
            cells = format_html(
                "<td>{}</td><td>{}</td><td>{} → {}</td><td>{}</td><td>{} {}</td><td>{}</td>{}",
                index, link, item.get("from") or "any", item.get("to") or "any", match,
                item.get("action", ""), badges, tcp, hits.cell(item.get("name")))
            buttons = format_html(
                '<button class="secondary" title="move up" formaction="{0}{1}/move/up/"{2}>↑'
                '</button><button class="secondary" title="move down" '
                'formaction="{0}{1}/move/down/"{3}>↓</button> ', base, index,
                mark_safe(" disabled") if index == 0 else "",
                mark_safe(" disabled") if index == last else "")
        else:
            vlans = item.get("vlans") if isinstance(item.get("vlans"), list) else []
            content = (", ".join(item["interfaces"])
                       + (f" (VLAN {', '.join(map(str, vlans))})" if vlans else "")
                       if item.get("interfaces") else
                       f"{item['protocol']} " + ", ".join(map(str, item.get("ports", [])))
                       if item.get("protocol") else
                       ", ".join(map(str, item.get("entries", []))))
            if len(content) > 120:
                content = content[:119] + "…"
            cells = format_html("<td>{}</td><td>{}</td><td>{}</td>", link, content,
                                item.get("comment", ""))
            buttons = ""
        if admin:
            cells += format_html('<td>{}<button class="danger" formaction="{}{}/delete/">Delete'
                                 '</button></td>', buttons, base, index)
        rows.append(format_html("<tr>{}</tr>", cells))
    return mark_safe("\n".join(rows))


def section_list(request, section):
    """One page of PAGE_SIZE items (?page=N), in policy order; ?q= filters by name."""
    _section(section)
    draft, document = drafts.current()
    items = list(enumerate(drafts.items(document, section)))
    query = request.GET.get("q", "").strip()
    if query:
        items = [(i, item) for i, item in items if query in str(item.get("name", ""))]
    page = Paginator(items, PAGE_SIZE).get_page(request.GET.get("page"))
    hits = ClassHits([item.get("name") for _, item in page.object_list]) \
        if section == "classes" else None
    return render(request, "policy/section.html", {
        **status_context(draft), "section": section, "title": TITLES[section][0],
        "noun": TITLES[section][1], "items": page.object_list, "page": page, "q": query,
        "draft": draft, "total": len(items), "hits": hits,
        "rows": _rows(section, page.object_list, reverse("policy_section", args=[section]),
                      is_admin(request.user), len(drafts.items(document, section)) - 1, hits)})


def _form(section, data, document, initial=None):
    cls = FORMS[section]
    kwargs = {"document": document} if section == "classes" else {}
    return cls(data, initial=initial, **kwargs)


def item_edit(request, section, index=None):
    _section(section)
    draft = drafts.get()
    entries = drafts.items(draft.document, section)
    if index is not None and not 0 <= index < len(entries):
        raise Http404("no such item")
    noun = TITLES[section][1]
    initial = {"version": draft.version}
    if index is not None:
        initial.update(FORMS[section].initial_from(entries[index]))
    form = _form(section, request.POST if request.method == "POST" else None,
                 draft.document, initial)
    if section == "classes" and not seqrand_available():
        form.fields["seqrand"].help_text = (
            "Unavailable on this firewall: its kernel has no seqrand helper (Tusk's kernel "
            "has it). Applying a class that uses it is refused.")
    status = 200
    if request.method == "POST":
        if form.is_valid():
            item = form.to_item()
            try:
                drafts.save_item(section, index, item, form.cleaned_data["version"],
                                 request.user)
            except drafts.StaleDraft:
                form.add_error(None, "The draft was changed by someone else after you opened "
                                     "this form. Reload it and make your change again.")
            except PolicyError as error:
                position = len(entries) if index is None else index
                form.add_problems(error, within=f"{section}[{position}]")
            else:
                audit.record(request, f"{noun} {'add' if index is None else 'edit'}",
                             item["name"], section=section, item=item)
                messages.success(request, f"Saved {noun} {item['name']} in the draft.")
                return redirect("policy_section", section=section)
        status = 400
    return render(request, "policy/item_form.html", {
        "form": form, "section": section, "noun": noun, "index": index,
        "title": TITLES[section][0]}, status=status)


@require_POST
def item_delete(request, section, index):
    _section(section)
    draft = drafts.get()
    entries = drafts.items(draft.document, section)
    if not 0 <= index < len(entries):
        raise Http404("no such item")
    name = entries[index].get("name")
    try:
        drafts.delete_item(section, index, _version(request), request.user)
    except drafts.StaleDraft:
        messages.error(request, "The draft was changed by someone else; nothing was deleted.")
    except PolicyError as error:
        for problem in error.problems:
            messages.error(request, str(problem))
    else:
        audit.record(request, f"{TITLES[section][1]} delete", name, section=section)
        messages.success(request, f"Deleted {TITLES[section][1]} {name} from the draft.")
    return redirect("policy_section", section=section)


@require_POST
def class_move(request, index, direction):
    offset = {"up": -1, "down": 1}.get(direction)
    if offset is None:
        raise Http404("up or down")
    try:
        drafts.move_class(index, offset, _version(request), request.user)
    except drafts.StaleDraft:
        messages.error(request, "The draft was changed by someone else; nothing was moved.")
    except PolicyError as error:
        messages.error(request, str(error))
    else:
        audit.record(request, "class move", str(index), direction=direction)
    return redirect("policy_section", section="classes")


def _version(request):
    try:
        return int(request.POST.get("version", ""))
    except ValueError:
        return -1


def apply(request):
    """GET: the diff of the rendered ruleset against the live one. POST: queue the apply
    (services.apply_draft)."""
    draft = drafts.get()
    live = live_revision(fields=None)
    new = render_ruleset(load_policy(draft.document))
    old = live.ruleset if live else ""
    problems = services.apply_problems(draft.document)
    form = ApplyForm(request.POST or None, initial={"version": draft.version})
    if request.method == "POST" and form.is_valid():
        try:
            queued = services.apply_draft(Actor.of(request), form.cleaned_data["version"],
                                          form.cleaned_data["timeout"])
        except PolicyError:
            form.add_error(None, "The draft cannot be applied as it stands; change what "
                                 "the problems above name first.")
        except ServiceError:
            form.add_error(None, "The draft changed since this diff was shown; review it again.")
        else:
            return redirect(reverse("job", args=[queued.job]) + "?next=policy_status")
    return render(request, "policy/apply.html", {
        "form": form, "diff": diff(old, new, f"live ({live or 'empty'})",
                                   f"draft version {draft.version}"),
        "live": live, "draft": draft, "problems": problems},
        status=400 if form.errors else 200)


def status(request):
    """The commit-confirm panel: countdown with Confirm and Roll back."""
    return render(request, "policy/status.html", status_context())


@require_POST
@not_found
def revision_to_draft(request, number):
    try:
        services.draft_from_revision(Actor.of(request), number)
    except PolicyError as error:
        messages.error(request, f"Revision {number} is not a valid policy for this version of "
                                f"Tusk: {error}")
        return redirect("policy_revision", number=number)
    messages.success(request, f"The draft is now the policy of revision {number}.")
    return redirect("policy")


def export(request):
    exported = services.export()
    response = HttpResponse(exported.text, content_type="application/yaml")
    response["Content-Disposition"] = f'attachment; filename="{exported.filename}"'
    return response


def import_policy(request):
    form = ImportForm(request.POST or None, request.FILES or None)
    problems = []
    if request.method == "POST" and form.is_valid():
        try:
            services.import_policy(Actor.of(request), form.cleaned_data["policy_text"])
        except PolicyError as error:
            problems = error.problems
        else:
            messages.success(request, "Imported: the draft is the imported policy now. "
                                      "Review the diff and apply it.")
            return redirect("policy")
    return render(request, "policy/import.html", {"form": form, "problems": problems},
                  status=400 if (problems or form.errors) else 200)


def presets(request, failed=None):
    """The catalogue of service presets (core/presets.py); for admins, each with its form
    adding it to the draft. failed: (preset key, the bound form that was refused)."""
    draft = drafts.get()
    shown = []
    for preset in catalogue.PRESETS:
        form = failed[1] if failed and failed[0] == preset.key else PresetForm(
            initial={"version": draft.version}, document=draft.document,
            prefix=preset.key)
        shown.append((preset, form))
    return render(request, "policy/presets.html", {**status_context(draft), "presets": shown},
                  status=400 if failed else 200)


@require_POST
def preset_add(request, key):
    """Adds preset key's services (and a class, if named) to the draft, whole or not at
    all: the draft is saved once, through the engine's checks."""
    preset = catalogue.BY_KEY.get(key)
    if preset is None:
        raise Http404("no such preset")
    draft = drafts.get()
    form = PresetForm(request.POST, document=draft.document, prefix=key)
    if form.is_valid():
        data = form.cleaned_data
        document, added = catalogue.add_to(draft.document, preset, data["class_name"].strip(),
                                           data["from_zone"] or None, data["to_zone"] or None)
        try:
            drafts.save_document(document, data["version"], request.user)
        except drafts.StaleDraft:
            form.add_error(None, "The draft was changed by someone else after you opened "
                                 "this page. Reload it and add the preset again.")
        except PolicyError as error:
            form.add_problems(error, within=f"classes[{len(document['classes']) - 1}]"
                              if data["class_name"].strip() else "")
        else:
            audit.record(request, "policy preset add", key, added=added)
            messages.success(request, f"Added {', '.join(added)} from the preset "
                             f"{preset.title} to the draft." if added else
                             f"The draft already has every service of {preset.title}.")
            return redirect("policy_section", section="classes" if data["class_name"].strip()
                            else "services")
    return presets(request, failed=(key, form))
