"""What a restore changes (plan: the preview) and the restore itself: one transaction
replaces the policy draft, the network draft and the users, writes the audit entry and
queues the agent jobs that apply the restored policy (the normal apply: unconfirmed, it
rolls back by itself) and the tuning profile. A refused check or a stale preview changes
nothing.

The network is restored into the Network pages' draft and never applied here: a network
change can cut the operator off, so it goes through Review and apply (commit-confirm,
confirmed over the new management address). A backup made on other hardware may name
ports this box lacks: the operator maps each of its ports onto one of this box's, and the
mapping renames the port wherever it is named - the network's links and references, the
VLANs named after it (<port>.<id>) and the restored policy's zones."""
import copy

from django.contrib.auth import get_user_model, update_session_auth_hash
from django.db import transaction

from accounts import audit
from accounts.models import Profile, Role
from box import snapshot, verify
from jobs import queue
from network import draft as network_drafts
from network.core import model as network_model
from network.core.errors import NetworkError, Problem
from network.core.normalise import from_document
from network.models import Draft as NetworkDraft
from policy import draft as drafts
from policy.core.normalise import load_policy, parse_yaml
from policy.forms import TITLES
from policy.models import Draft
from policy.views import status_context

from . import collect as collected
from . import document as backups

DRAFT, CONFIRMED = "draft", "confirmed"  # which of the backup's policies becomes the draft


class StaleRestore(Exception):
    """The draft, the users or the tuning changed after the preview was shown."""


def _user_changes(now, wanted):
    changes = []
    if now["role"] != wanted["role"]:
        changes.append(f"role {now['role']} → {wanted['role']}")
    if now["active"] != wanted["active"]:
        changes.append("activated" if wanted["active"] else "deactivated")
    if now["password_hash"] != wanted["password_hash"]:
        changes.append("password")
    if now["must_change_password"] != wanted["must_change_password"]:
        changes.append("must change the password" if wanted["must_change_password"]
                       else "need not change the password")
    return changes


def _users_plan(wanted):
    now = {entry["username"]: entry for entry in collected.users()}
    plan = {"added": [], "updated": [], "removed": sorted(set(now) - {
        entry["username"] for entry in wanted}), "unchanged": []}
    for entry in wanted:
        name = entry["username"]
        if name not in now:
            plan["added"].append(f"{name} ({entry['role']})")
            continue
        changes = _user_changes(now[name], entry)
        if changes:
            plan["updated"].append(f"{name}: {', '.join(changes)}")
        else:
            plan["unchanged"].append(name)
    return plan


def _policy_plan(policy):
    draft = drafts.get()
    wanted, confirmed = policy["draft"], policy["confirmed"]
    return {
        "draft_version": draft.version,
        "same": draft.document == wanted,
        "sections": [(TITLES[s][0], len(drafts.items(draft.document, s)),
                      len(drafts.items(wanted, s))) for s in drafts.SECTIONS],
        "confirmed": confirmed and {k: v for k, v in confirmed.items() if k != "policy_text"},
        "confirmed_is_draft": bool(confirmed) and parse_yaml(confirmed["policy_text"]) == wanted,
    }


def _tuning_plan(tuning):
    boot, found = collected.boot_profile(), collected.operator_profiles()
    write = sorted(name for name, text in tuning["profiles"].items() if found.get(name) != text)
    plan = {"boot_now": boot, "boot": tuning["boot_profile"], "write": write,
            "kept": sorted(set(found) - set(tuning["profiles"]))}
    plan["apply"] = plan["boot"] != boot or plan["boot"] in write
    plan["job"] = bool(write) or plan["apply"]
    return plan


def backup_ports(network):
    """{name: role} of the ports the backup's network configurations name (the draft's,
    then the confirmed one's), in their order."""
    found = {}
    documents = [network["draft"]] + ([network["confirmed"]["document"]]
                                      if network["confirmed"] else [])
    for document in documents:
        for port in document.get("interfaces") or []:
            found.setdefault(port["name"], port.get("role", network_model.TRAFFIC))
    return found


def _network_plan(network):
    """None for a backup without a network section; else its ports against this box's
    (box None: the agent has not reported them yet) and whether they must be mapped."""
    if network is None:
        return None
    box = network_drafts.present()
    ports = backup_ports(network)
    draft = NetworkDraft.objects.filter(pk=1).only("version", "document").first()
    confirmed = network["confirmed"]
    return {
        "draft_version": draft and draft.version,
        "same": draft is not None and draft.document == network["draft"],
        "ports": [{"name": name, "role": role, "here": box is not None and name in box}
                  for name, role in ports.items()],
        "box": None if box is None else sorted(box),
        "extra": sorted(set(box or ()) - set(ports)),
        "map": box is not None and not set(ports) <= set(box),
        "confirmed": confirmed and {"revision": confirmed["revision"]},
        "confirmed_is_draft": bool(confirmed) and confirmed["document"] == network["draft"],
    }


def plan(document):
    """What restoring document would change, against what the box has now."""
    return {"policy": _policy_plan(document["policy"]), "users": _users_plan(document["users"]),
            "tuning": _tuning_plan(document["tuning"]),
            "network": _network_plan(document.get("network")), "token": collected.state_token()}


def network_to_restore(network, source, ports):
    """(which one: DRAFT or CONFIRMED, the network document renamed by the port mapping
    {backup port: this box's port}, {old: new} of every link renamed). The same source as
    the policy's: the confirmed policy ran with the confirmed network, the drafts were
    edited against each other; without a confirmed network, the draft."""
    if source == CONFIRMED and network["confirmed"]:
        document = network["confirmed"]["document"]
    else:
        source, document = DRAFT, network["draft"]
    renames = network_drafts.follow_ports(document, ports)
    return source, network_drafts.renamed(document, renames), renames


def _zones_renamed(policy_document, renames):
    """The policy with its zones' interfaces renamed ({old: new}), so that it names the
    interfaces the restored network has."""
    document = copy.deepcopy(policy_document)
    for zone in document.get("zones") or []:
        zone["interfaces"] = [renames.get(name, name) for name in zone["interfaces"]]
    return document


def _restore_network(user, network, source, ports):
    """Replaces the network draft (not applied: Network -> Review and apply does that) with
    the backup's, mapped onto this box's ports and checked against them as the Network
    pages check a save (NetworkError, paths under network.draft / network.confirmed.
    document). Not against the policy's zones: the restore replaces the policy too, and
    the restored policy is checked against this network instead.
    Returns (source, {old: new}, whether the draft changed, the NetworkConfig)."""
    source, document, renames = network_to_restore(network, source, ports)
    where = "network.confirmed.document" if source == CONFIRMED else "network.draft"
    try:
        config = from_document(document, present=network_drafts.present())
    except NetworkError as error:
        raise NetworkError([Problem(p.code, f"{where}.{p.path}" if p.path else where,
                                    p.message) for p in error.problems]) from None
    draft = NetworkDraft.objects.select_for_update().filter(pk=1).first()
    if draft is None:
        NetworkDraft.objects.create(pk=1, document=document, updated_by=user)
        return source, renames, True, config
    if draft.document == document:
        return source, renames, False, config
    draft.document = document
    draft.version += 1
    draft.updated_by = user
    draft.save(update_fields=["document", "version", "updated_by", "updated_at"])
    return source, renames, True, config


def _restore_users(wanted):
    people = get_user_model()
    existing = {user.username: user for user in people.objects.select_for_update()}
    names = {entry["username"] for entry in wanted}
    for name, user in existing.items():
        if name not in names:
            user.delete()
    for entry in wanted:
        user = existing.get(entry["username"]) or people(username=entry["username"])
        user.password = entry["password_hash"]
        user.is_active = entry["active"]
        if entry["role"] != Role.ADMIN:  # roles are Tusk's profiles; a superuser is an admin
            user.is_superuser = user.is_staff = False
        user.save()
        Profile.objects.update_or_create(user=user, defaults={
            "role": entry["role"], "must_change_password": entry["must_change_password"]})


def restore(actor, pending, token, source=DRAFT, apply=True, ports=None,
            keep_network=False):
    """Restores the pending upload, for actor (accounts.audit.Actor: the Backup page's
    person or an API caller), if the preview (token) still describes the box.
    ports: {backup port: this box's port} (ConfirmForm's checked mapping; {} when the
    names match); keep_network: the backup's network is left out. Raises StaleRestore,
    or NetworkError when the network does not fit this box; changes nothing then.
    Returns (plan, the policy apply job or None, the tuning job or None, the network
    restored: {"source", "renamed", "changed", "policy_waits"} or None)."""
    user = actor.user
    document = backups.read(pending.text.encode(), user.get_username())
    with transaction.atomic():
        drafts.get_meta()  # exists
        Draft.objects.select_for_update().only("pk").get(pk=1)
        list(get_user_model().objects.select_for_update().values_list("pk", flat=True))
        changes = plan(document)
        if changes["token"] != token:
            raise StaleRestore()
        policy, renames = document["policy"], {}
        network = None if keep_network else document.get("network")
        restored, against = None, None   # the policy is checked against the box's network
        if network is not None:          # ... or against the one restored with it
            network_source, renames, changed, config = _restore_network(
                user, network, source, ports or {})
            restored = {"source": network_source, "renamed": renames, "changed": changed}
            against = [("restored", config)]
        if source == CONFIRMED and policy["confirmed"]:
            text = policy["confirmed"]["policy_text"]
        else:
            source, text = DRAFT, drafts.to_yaml(policy["draft"])
        if renames:
            text = drafts.to_yaml(_zones_renamed(parse_yaml(text), renames))
        if drafts.get().document != parse_yaml(text):
            drafts.import_text(text, user, against)
        _restore_users(document["users"])
        tuning = changes["tuning"]
        tuning_job = queue.enqueue("backup.tuning", {
            "profiles": {name: document["tuning"]["profiles"][name] for name in tuning["write"]},
            "profile": tuning["boot"], "apply": tuning["apply"]},
            user) if tuning["job"] else None
        draft = drafts.get()
        apply_job = None
        # Applied now only if it fits the network the box runs: a zone on a link only the
        # restored network has waits until that network is applied (the agent would refuse).
        waits = restored is not None and bool(verify.network_problems(
            load_policy(draft.document), snapshot.read(snapshot.WEB, "network").network))
        if restored is not None:
            restored["policy_waits"] = waits
        if apply and not waits and status_context(draft)["changes_pending"]:
            apply_job = queue.enqueue("policy.apply", {
                "policy_text": drafts.to_yaml(draft.document), "timeout": None,
                "draft_version": draft.version}, user)
        users = changes["users"]
        audit.record_for(actor, "backup restore", pending.name, source=source,
                         draft_version=draft.version,
                         users={k: len(v) for k, v in users.items()}, removed=users["removed"],
                         boot_profile=tuning["boot"], profiles=tuning["write"],
                         policy_job=apply_job and apply_job.pk,
                         tuning_job=tuning_job and tuning_job.pk, network=restored and {
                             **restored, "ports": ports or {},
                             "draft_version": NetworkDraft.objects.get(pk=1).version},
                         network_kept=bool(keep_network and document.get("network")))
        pending.delete()
    return changes, apply_job, tuning_job, restored


def stay_signed_in(request):
    """After a restore over a session: the backup may have changed this person's
    password hash; the session follows it, as after a password change."""
    me = get_user_model().objects.filter(username=request.user.get_username()).first()
    if me is not None and me.password != request.user.password:
        update_session_auth_hash(request, me)
