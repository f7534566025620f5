"""The network being edited in the web UI: one document, the structure of network.toml,
changed one item at a time. Every change is validated whole by the network core
(normalise.from_document) against the machine's ports (the agent's network.facts) and
the policy's zones (the draft's and the live revision's) before it is saved, so a refused
change leaves the draft as it was. The agent checks the same way again before applying."""
import copy
import dataclasses

from django.db import transaction

from box import snapshot, verify
from jobs.models import PeriodicState

from .contracts import Facts, RoutingStatus
from .core import model
from .core.errors import Code, NetworkError
from .core.normalise import from_document, parse, to_document
from .core.routing import HIDDEN
from .models import Draft, NetworkState

FACTS = "network.facts"   # the agent's periodic task: ports, addresses, routes
ROUTING = "network.routing"   # and FRR's sessions
LINKS = ("interfaces", "bonds", "vlans", "bridges")
SECTIONS = ("vlans", "bonds", "bridges", "routes", "neighbours", "ospf")
# where a section's list is in the document, when not at its top
NESTED = {"neighbours": ("routing", "bgp", "neighbours"), "ospf": ("routing", "ospf")}
ROUTING_KEYS = ("router_id", "bfd_interval", "bfd_multiplier", "standby")
BGP_KEYS = ("asn", "prefixes", "communities", "blackholes")
# where a link's name is referred to by other items (renames follow, deletes are checked)
REFERENCES = (("vlans", "parent"), ("routes", "interface"), ("ospf", "interface"))


class StaleDraft(Exception):
    """The draft changed after the form was opened."""


def facts():
    """What the agent last found on the machine (network.facts, contracts.Facts, as its
    table), or {} before it has reported - or when the row is not of that shape."""
    found = PeriodicState.read(FACTS, Facts)
    return dataclasses.asdict(found) if found is not None else {}


def routing_status():
    """What the agent last read of FRR (network.routing, contracts.RoutingStatus, as its
    table), or None before it has reported."""
    found = PeriodicState.read(ROUTING, RoutingStatus)
    return dataclasses.asdict(found) if found is not None else None


def present():
    """{port: its facts} for the checks, or None while the agent has not reported
    (then the agent's own check before applying is the one that knows the ports)."""
    return facts().get("ports")


def zones_of(policy_document):
    """{zone name: [interface names]} of a policy document (the draft's JSON or a
    parsed policy.yaml), reading only what is there."""
    found = {}
    zones = policy_document.get("zones") if isinstance(policy_document, dict) else None
    for zone in zones if isinstance(zones, list) else []:
        if isinstance(zone, dict) and isinstance(zone.get("name"), str):
            names = zone.get("interfaces")
            found.setdefault(zone["name"], []).extend(
                n for n in (names if isinstance(names, list) else []) if isinstance(n, str))
    return found


def merge_zones(*zone_maps):
    """One {zone: [interfaces]} of several: a zone's interfaces in any of them count."""
    merged = {}
    for zones in zone_maps:
        for name, interfaces in zones.items():
            merged.setdefault(name, [])
            merged[name] += [i for i in interfaces if i not in merged[name]]
    return merged


def policies():
    """The documents of the live policy and of the policy draft."""
    try:
        return snapshot.read(snapshot.WEB, "policy").values("policy")
    except snapshot.SnapshotError as error:
        raise NetworkError(Code.POLICY, "", f"{error}: its zones cannot be checked") from None


def policy_zones(documents=None):
    """The zones of the live policy and of the policy draft: an interface either of them
    uses may not go away."""
    return merge_zones(*(zones_of(document) for document in
                         (policies() if documents is None else documents)))


def confirmed_config():
    """The confirmed configuration as the agent last mirrored its file, or None."""
    state = NetworkState.objects.filter(pk=1).first()
    if state is None or not state.confirmed_text:
        return None
    try:
        return parse(state.confirmed_text, "network.toml")
    except NetworkError:
        return None


def starting_document():
    """The first draft: the confirmed configuration; without one, the machine's ports
    as tusk-net starts a new box (the first on DHCP as management, the others unused)."""
    config = confirmed_config()
    if config is not None:
        return to_document(config)
    document = to_document(model.NetworkConfig())
    for index, name in enumerate(sorted(present() or {})):
        document["interfaces"].append({
            "name": name, "role": model.MANAGEMENT if index == 0 else model.UNUSED,
            "description": "", "addresses": [], "dhcp": index == 0, "autoconf": False,
            "mtu": 0})
    return document


def get():
    draft = Draft.objects.filter(pk=1).first()
    if draft is not None:
        return draft
    document = starting_document()
    if not document["interfaces"]:
        # the agent has reported neither a confirmed configuration nor the ports yet: a
        # draft kept now would have no port, be invalid and stay so (a backup of it too);
        # it is shown, and kept by the first save
        return Draft(pk=1, document=document)
    Draft.objects.get_or_create(pk=1, defaults={"document": document})
    return Draft.objects.get(pk=1)


def check(document):
    """The configuration of document, checked whole against this machine, the policy's
    zones (their interfaces, and which are bridged) and the links this box's HA pair uses
    (box/verify.py); NetworkError with every problem."""
    documents = policies()
    config = from_document(document, present=present(), zones=policy_zones(documents))
    pairs = snapshot.read(snapshot.WEB, "ha").ha
    problems = verify.pair_link_problems(config, pairs) + \
        verify.pair_routing_problems(config, pairs) + \
        verify.bridged_zone_problems(config, documents)
    if problems:
        raise NetworkError(problems)
    return config


def save_document(document, version, user):
    """Validates and stores document if the draft is still at version. Raises
    NetworkError (every problem) or StaleDraft; saves nothing then."""
    if isinstance(document, dict):
        document = keep_secrets(copy.deepcopy(document), get().document)
    check(document)
    with transaction.atomic():
        Draft.objects.get_or_create(pk=1, defaults={"document": get().document})
        draft = Draft.objects.select_for_update().get(pk=1)
        if version is not None and draft.version != version:
            raise StaleDraft()
        draft.document = document
        draft.version += 1
        draft.updated_by = user if user is not None and user.is_authenticated else None
        draft.save(update_fields=["document", "version", "updated_by", "updated_at"])
    return draft


def discard(version, user):
    """The draft back to the configuration in effect (starting_document()) if it is still
    at version: what an operator does after a rollback left the change that failed in
    the draft. Raises StaleDraft; saves nothing then."""
    document = starting_document()
    with transaction.atomic():
        Draft.objects.get_or_create(pk=1, defaults={"document": document})
        draft = Draft.objects.select_for_update().get(pk=1)
        if draft.version != version:
            raise StaleDraft()
        draft.document = document
        draft.version += 1
        draft.updated_by = user if user is not None and user.is_authenticated else None
        draft.save(update_fields=["document", "version", "updated_by", "updated_at"])
    return draft


def path_of(section):
    """A section's path in the document, as problems name it: "routing.bgp.neighbours"."""
    return ".".join(NESTED.get(section, (section,)))


def entries(document, section, create=False):
    """The list of section's items in document ([] when absent; made when create)."""
    keys = NESTED.get(section, (section,))
    where = document
    for key in keys[:-1]:
        if not isinstance(where.get(key), dict):
            if not create:
                return []
            where[key] = {}
        where = where[key]
    if not isinstance(where.get(keys[-1]), list):
        if not create:
            return []
        where[keys[-1]] = []
    return where[keys[-1]]


def shown(document):
    """A copy of document as the pages and the API show it: each password replaced by
    HIDDEN."""
    document = copy.deepcopy(document)
    for neighbour in entries(document, "neighbours"):
        if isinstance(neighbour, dict) and neighbour.get("password"):
            neighbour["password"] = HIDDEN
    return document


def keep_secrets(document, current):
    """document with each HIDDEN password put back: the one current (the draft) holds for
    the neighbour of the same address. One it has none for stays HIDDEN, which the check
    refuses, naming it."""
    held = {n.get("address"): n.get("password") for n in entries(current, "neighbours")
            if isinstance(n, dict)}
    for neighbour in entries(document, "neighbours"):
        if isinstance(neighbour, dict) and neighbour.get("password") == HIDDEN and \
                held.get(neighbour.get("address")):
            neighbour["password"] = held[neighbour["address"]]
    return document


def port_index(document, name):
    return next((i for i, p in enumerate(document.get("interfaces") or [])
                 if p.get("name") == name), None)


def save_item(key, index, item, version, user):
    """key: interfaces, bonds, vlans, bridges or routes; index None appends. A renamed
    link is renamed where VLANs, routes, bonds and bridges refer to it."""
    document = copy.deepcopy(get().document)
    items = entries(document, key, create=True)
    if index is None:
        items.append(item)
    else:
        old_name = items[index].get("name")
        items[index] = item
        if key in LINKS and old_name and item.get("name") != old_name:
            _rename(document, {old_name: item["name"]})
    return save_document(document, version, user)


def save_system(system, version, user):
    document = copy.deepcopy(get().document)
    document["system"] = system
    return save_document(document, version, user)


def save_routing(values, version, user):
    """The routing settings ([routing]'s own keys and [routing.bgp]'s, from values),
    keeping the neighbours and OSPF links."""
    document = copy.deepcopy(get().document)
    routing = document.setdefault("routing", {})
    routing.update({key: values[key] for key in ROUTING_KEYS})
    routing.setdefault("bgp", {}).update({key: values[key] for key in BGP_KEYS})
    return save_document(document, version, user)


def delete_item(key, index, version, user):
    """Removes one item; refused (NetworkError) when the rest does not hold together:
    a VLAN on a deleted bond, a route through a deleted VLAN, a zone's interface."""
    document = copy.deepcopy(get().document)
    del entries(document, key)[index]
    return save_document(document, version, user)


def _rename(document, renames):
    """Where links are referred to, {old: new} at once (so that a swap works)."""
    for key, field in REFERENCES:
        for entry in entries(document, key):
            if entry.get(field) in renames:
                entry[field] = renames[entry[field]]
    for key in ("bonds", "bridges"):
        for entry in document.get(key) or []:
            entry["members"] = [renames.get(m, m) for m in entry.get("members") or []]


def follow_ports(document, ports):
    """{old: new} of every link that is renamed when the ports are ({old port: new port},
    a backup put onto other hardware): the ports, and each VLAN named the default way,
    <parent>.<id>, on a renamed port, which follows its parent."""
    renames = {old: new for old, new in ports.items() if old != new}
    for vlan in document.get("vlans") or []:
        parent = vlan.get("parent")
        if parent in renames and vlan.get("name") == f"{parent}.{vlan.get('id')}":
            renames[vlan["name"]] = f"{renames[parent]}.{vlan['id']}"
    return renames


def renamed(document, renames):
    """A copy of document with links renamed ({old: new}, at once): their own names and
    every reference to them."""
    document = copy.deepcopy(document)
    for key in LINKS:
        for entry in document.get(key) or []:
            entry["name"] = renames.get(entry.get("name"), entry.get("name"))
    _rename(document, renames)
    return document

