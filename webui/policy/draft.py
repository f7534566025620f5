"""The policy being edited in the web UI: one document, the same structure as the
YAML file, changed one item at a time. Every change is validated whole by the
policy engine before it is saved, so the draft is always a valid policy and a
refused change leaves it as it was."""
import copy
import hashlib

import yaml
from django.db import transaction

from box import snapshot, verify

from .core.errors import Code, PolicyError, Problem
from .core.normalise import load_policy, load_policy_text, parse_yaml
from .core.render import render
from .models import Draft, Revision

SECTIONS = ("zones", "address_sets", "services", "classes")
# Where items of a section are named, for renames and deletes: (the list, its field, what
# an item of that list is called in a message)
REFERENCES = {
    "zones": (("classes", "from", "class"), ("classes", "to", "class"),
              ("nat.source", "to", "source NAT rule"),
              ("nat.forwards", "from", "port forward")),
    "address_sets": (("classes", "source", "class"), ("classes", "destination", "class"),
                     ("nat.source", "source", "source NAT rule")),
    "services": (("classes", "services", "class"),),
    "classes": (("nat.forwards", "class", "port forward"),),
}
EMPTY = {"version": 1, "zones": [], "address_sets": [], "services": [], "classes": []}


class StaleDraft(Exception):
    """The draft changed after the form was opened."""


def ruleset_sha256(document):
    return hashlib.sha256(render(load_policy(document)).encode()).hexdigest()


def get():
    """The draft; created from the live revision's policy (or empty) the first time."""
    draft = Draft.objects.filter(pk=1).first()
    if draft is not None:
        return draft
    document = copy.deepcopy(EMPTY)
    live = Revision.objects.filter(outcome="confirmed").order_by("-number").first()
    if live is not None:
        document = parse_yaml(live.policy_text) or document
    Draft.objects.get_or_create(pk=1, defaults={"document": document,
                                                "ruleset_sha256": ruleset_sha256(document)})
    return Draft.objects.get(pk=1)


# (version, updated_at) -> document: a page reads the draft without decoding it again.
# Not the version alone: a database emptied and filled again (the tests do) counts
# versions from 1 again, and this process would show another draft of the same number.
_PARSED = {}


def current():
    """(the draft without its document, the document) for pages that only read it; the
    document is shared between requests - never change it (save_* copy it first)."""
    meta = get_meta()
    key = (meta.version, meta.updated_at)
    document = _PARSED.get(key)
    if document is None:
        document = Draft.objects.values_list("document", flat=True).get(pk=meta.pk)
        _PARSED.clear()
        _PARSED[key] = document
    return meta, document


def get_meta():
    """The draft without its document: version, hash, who and when."""
    fields = ("version", "ruleset_sha256", "updated_by", "updated_at")
    meta = Draft.objects.only(*fields).filter(pk=1).first()
    if meta is None:
        get()  # creates it
        meta = Draft.objects.only(*fields).get(pk=1)
    return meta


def to_yaml(document):
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)


def check_network(policy, networks=None):
    """Raises PolicyError with the problems of policy against the box's network
    (box/verify.py; networks: a snapshot's network part, the web process's when None)."""
    if networks is None:
        networks = snapshot.read(snapshot.WEB, "network").network
    problems = verify.network_problems(policy, networks)
    if problems:
        raise PolicyError(problems)


def save_document(document, version, user, network=None):
    """Validates and stores document, the whole policy, if the draft is still at version
    (None: whatever it is) - also against the box's network configuration (network:
    check_network's networks). All or nothing: raises PolicyError (every problem) or
    StaleDraft, and saves nothing then."""
    check_network(load_policy(document), network)
    get_meta()  # exists
    with transaction.atomic():
        draft = Draft.objects.select_for_update().only("version").get(pk=1)
        if version is not None and draft.version != version:
            raise StaleDraft()
        draft.document = document
        draft.version += 1
        draft.ruleset_sha256 = ruleset_sha256(document)
        draft.updated_by = user if user is not None and user.is_authenticated else None
        draft.save(update_fields=["document", "version", "ruleset_sha256", "updated_by",
                                  "updated_at"])
    return draft


def items(document, section):
    return document.get(section) or []


def save_item(section, index, item, version, user):
    """index None appends. A renamed zone, address set, service or class is renamed where
    the classes and the NAT rules refer to it as well."""
    draft = get()
    document = copy.deepcopy(draft.document)
    entries = document.setdefault(section, [])
    if index is None:
        entries.append(item)
    else:
        old_name = entries[index].get("name")
        entries[index] = item
        if old_name and item.get("name") != old_name and section in REFERENCES:
            _rename(document, section, old_name, item["name"])
    return save_document(document, version, user)


def delete_item(section, index, version, user):
    draft = get()
    document = copy.deepcopy(draft.document)
    name = document[section][index].get("name")
    users = _users(document, section, name)
    if users:
        raise PolicyError(Code.REFERENCE, f"{section}[{index}]",
                          f"{name} is used by {'; '.join(users)}; change those first")
    del document[section][index]
    return save_document(document, version, user)


def move_class(index, offset, version, user):
    draft = get()
    document = copy.deepcopy(draft.document)
    classes = document["classes"]
    other = index + offset
    if not 0 <= other < len(classes):
        return draft
    classes[index], classes[other] = classes[other], classes[index]
    return save_document(document, version, user)


def import_text(text, user, network=None):
    """A whole policy file replaces the draft - only if it is valid, also against network
    (check_network's configs: the box's when None; a restore passes the network it
    restores with the policy)."""
    load_policy_text(text)
    document = parse_yaml(text)
    return save_document(document, None, user, network)


def _referring(document, section):
    """(list path, index, item, field, what the item is) of every field that may name an
    item of section."""
    for where, key, what in REFERENCES.get(section, ()):
        if where.startswith("nat."):
            nat = document.get("nat")
            entries = nat.get(where[4:]) if isinstance(nat, dict) else None
        else:
            entries = document.get(where)
        for index, entry in enumerate(entries if isinstance(entries, list) else []):
            if isinstance(entry, dict):
                yield where, index, entry, key, what


def _rename(document, section, old, new):
    for _, _, entry, key, _ in _referring(document, section):
        value = entry.get(key)
        if value == old:
            entry[key] = new
        elif isinstance(value, list):
            entry[key] = [new if v == old else v for v in value]


def _users(document, section, name):
    """What refers to name, for the message refusing its delete: "class(es) a, b" and
    each NAT rule with the field ("port forward web (nat.forwards[0].class)")."""
    classes, nat = {}, []
    for where, index, entry, key, what in _referring(document, section):
        value = entry.get(key)
        if not (value == name or (isinstance(value, list) and name in value)):
            continue
        if what == "class":
            classes[index] = entry.get("name", "?")
        else:
            nat.append(f"{what} {entry.get('name', '?')} ({where}[{index}].{key})")
    in_order = [classes[index] for index in sorted(classes)]
    return ([f"class(es) {', '.join(in_order)}"] if classes else []) + nat


__all__ = ["Problem", "PolicyError"]
