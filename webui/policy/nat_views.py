"""Policy pages for the draft's NAT (nat.source, nat.forwards) and its settings, in the
pattern of views.py: each form edits one item, the whole document is saved by
draft.save_document (the engine's normalise stage and the network check first, all or
nothing), problem paths come back to the form's fields, and the draft's version refuses a
stale form. A port forward's form can create the class that admits it (forward_class.py)
in the same save."""
import copy

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts import audit

from . import draft as drafts
from .core.errors import PolicyError
from .forward_class import ForwardClass, problem_labels
from .nat_forms import ForwardForm, SettingsForm, SourceNatForm
from .views import status_context

KINDS = {"source": (SourceNatForm, "source NAT rule"), "forwards": (ForwardForm, "port forward")}
STALE = ("The draft was changed by someone else after you opened this form. Reload it and "
         "make your change again.")


def _kind(kind):
    if kind not in KINDS:
        raise Http404("no such NAT list")
    return kind


def _entries(document, kind):
    return (document.get("nat") or {}).get(kind) or []


def _with_item(document, kind, index, item):
    """document with item at nat.<kind>[index] (None: appended); a copy."""
    document = copy.deepcopy(document)
    entries = document.setdefault("nat", {}).setdefault(kind, [])
    if index is None:
        entries.append(item)
    else:
        entries[index] = item
    return document


def _tidy(document):
    """Drops the nat lists that are empty, and nat when both are."""
    nat = document.get("nat")
    if isinstance(nat, dict):
        for kind in KINDS:
            if kind in nat and not nat[kind]:
                del nat[kind]
        if not nat:
            del document["nat"]
    return document


def _source_row(index, rule):
    translate = rule.get("translate", "")
    if rule.get("address"):
        translate = rule["address"]
    return {"index": index, "name": rule.get("name", ""), "to": rule.get("to", ""),
            "source": ", ".join(rule.get("source") or []) or "any",
            "translate": translate, "ports": rule.get("ports", ""),
            "comment": rule.get("comment", "")}


def _forward_row(index, forward, class_index):
    to_ports = forward.get("to_ports")
    ports = ", ".join(map(str, forward.get("ports") or []))
    address = forward.get("address") or "the firewall's own addresses"
    return {"index": index, "name": forward.get("name", ""), "from": forward.get("from", ""),
            "hairpin": forward.get("hairpin", False),
            "external": f"{address} {forward.get('protocol', '')} {ports}",
            "server": f"{forward.get('to_address', '')}"
                      f"{' port ' + str(to_ports) if to_ports is not None else ''}",
            "class": forward.get("class", ""), "class_index": class_index.get(forward.get("class")),
            "comment": forward.get("comment", "")}


def nat(request):
    """Source NAT rules and port forwards, with how the classes see them."""
    draft, document = drafts.current()
    class_index = {c.get("name"): i for i, c in enumerate(document.get("classes") or [])}
    source = [_source_row(i, rule) for i, rule in enumerate(_entries(document, "source"))]
    forwards = [_forward_row(i, forward, class_index)
                for i, forward in enumerate(_entries(document, "forwards"))]
    return render(request, "policy/nat.html", {
        **status_context(draft), "draft": draft, "source": source, "forwards": forwards,
        "last_source": len(source) - 1})


def nat_edit(request, kind, index=None):
    _kind(kind)
    form_class, noun = KINDS[kind]
    draft = drafts.get()
    entries = _entries(draft.document, kind)
    if index is not None and not 0 <= index < len(entries):
        raise Http404("no such item")
    initial = {"version": draft.version}
    if index is not None:
        initial.update(form_class.initial_from(entries[index]))
    form = form_class(request.POST if request.method == "POST" else None, initial=initial,
                      document=draft.document)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            item = form.to_item()
            plan = None
            try:
                if kind == "forwards" and form.creates_class():
                    plan = ForwardClass(draft.document, item, index)
                    document = plan.build()
                else:
                    document = _with_item(draft.document, kind, index, item)
                drafts.save_document(document, form.cleaned_data["version"], request.user)
            except drafts.StaleDraft:
                form.add_error(None, STALE)
            except PolicyError as error:
                position = len(entries) if index is None else index
                _add_problems(form, error, f"nat.{kind}[{position}]", plan)
            else:
                audit.record(request, f"{noun} {'add' if index is None else 'edit'}",
                             item["name"], item=item, **_created(plan))
                messages.success(request, f"Saved {noun} {item['name']} in the draft."
                                 + _created_text(plan))
                return redirect("policy_nat")
        status = 400
    return render(request, "policy/nat_form.html", {
        "form": form, "kind": kind, "noun": noun, "index": index}, status=status)


def _add_problems(form, error, within, plan):
    """The engine's problems next to the form's fields; those of the items a forward
    creates next to the new class's name."""
    rest = []
    for label, problem in problem_labels(plan.labels if plan else {}, error.problems):
        if label is None:
            rest.append(problem)
        else:
            form.add_error("new_class", f"{label}: {problem.message}")
    if rest:
        form.add_problems(rest, within=within)


def _created(plan):
    if plan is None:
        return {}
    return {"created": {"class": plan.name, "position": plan.position, "before": plan.before,
                        "address_set": plan.address_set, "set_created": plan.created_set,
                        "service": plan.service, "service_created": plan.created_service}}


def _created_text(plan):
    if plan is None:
        return ""
    where = (f"before class {plan.before}, which would have taken its traffic first"
             if plan.before else "after the other classes")
    made = [f"class {plan.name} (classes[{plan.position}], {where})"]
    made.append(f"address set {plan.address_set}" if plan.created_set else None)
    made.append(f"service {plan.service}" if plan.created_service else None)
    reused = [f"address set {plan.address_set}" if not plan.created_set else None,
              f"service {plan.service}" if not plan.created_service else None]
    text = " Created " + ", ".join(m for m in made if m) + "."
    reused = [r for r in reused if r]
    if reused:
        text += " The class uses the existing " + " and ".join(reused) + "."
    return text


@require_POST
def nat_delete(request, kind, index):
    _kind(kind)
    noun = KINDS[kind][1]
    draft = drafts.get()
    entries = _entries(draft.document, kind)
    if not 0 <= index < len(entries):
        raise Http404("no such item")
    name = entries[index].get("name")
    document = copy.deepcopy(draft.document)
    del document["nat"][kind][index]
    try:
        drafts.save_document(_tidy(document), _version(request), request.user)
    except drafts.StaleDraft:
        messages.error(request, "The draft was changed by someone else; nothing was deleted.")
    except PolicyError as error:
        messages.error(request, str(error))
    else:
        audit.record(request, f"{noun} delete", name)
        messages.success(request, f"Deleted {noun} {name} from the draft"
                         + (" (its class stays: delete it on Traffic classes if nothing "
                            "else needs it)." if kind == "forwards" else "."))
    return redirect("policy_nat")


@require_POST
def source_move(request, index, direction):
    """Source NAT rules match in order (the first wins)."""
    offset = {"up": -1, "down": 1}.get(direction)
    if offset is None:
        raise Http404("up or down")
    draft = drafts.get()
    document = copy.deepcopy(draft.document)
    rules = _entries(document, "source")
    other = index + offset
    if not (0 <= index < len(rules) and 0 <= other < len(rules)):
        raise Http404("no such rule")
    rules[index], rules[other] = rules[other], rules[index]
    try:
        drafts.save_document(document, _version(request), request.user)
    except drafts.StaleDraft:
        messages.error(request, "The draft was changed by someone else; nothing was moved.")
    except PolicyError as error:
        messages.error(request, str(error))
    else:
        audit.record(request, "source NAT rule move", rules[other].get("name"),
                     direction=direction)
    return redirect("policy_nat")


def settings_edit(request):
    """The policy's settings: the confirm timeout and logging."""
    draft = drafts.get()
    initial = {"version": draft.version,
               **SettingsForm.initial_from(draft.document.get("settings") or {})}
    form = SettingsForm(request.POST if request.method == "POST" else None, initial=initial)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            document = copy.deepcopy(draft.document)
            document["settings"] = form.to_item()
            try:
                drafts.save_document(document, form.cleaned_data["version"], request.user)
            except drafts.StaleDraft:
                form.add_error(None, STALE)
            except PolicyError as error:
                form.add_problems(error, within="settings")
            else:
                audit.record(request, "policy settings edit", "settings",
                             settings=document["settings"])
                messages.success(request, "Saved the settings in the draft.")
                return redirect("policy")
        status = 400
    return render(request, "policy/settings.html", {"form": form, **status_context()},
                  status=status)


def _version(request):
    try:
        return int(request.POST.get("version", ""))
    except ValueError:
        return -1
