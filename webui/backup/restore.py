"""What a restore changes (plan: the preview) and the restore itself: one transaction
replaces the draft and the users, writes the audit entry and queues the agent jobs
that apply the restored policy (the normal apply: unconfirmed, it rolls back by
itself) and the tuning profile. A refused check or a stale preview changes nothing."""
from django.contrib.auth import get_user_model, update_session_auth_hash
from django.db import transaction

from accounts import audit
from accounts.models import Profile, Role
from jobs import queue
from policy import draft as drafts
from policy.core.normalise import parse_yaml
from policy.forms import TITLES
from policy.models import Draft
from policy.views import status_context

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
    now = {entry["username"]: entry for entry in backups.users()}
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
    boot, found = backups.boot_profile(), backups.operator_profiles()
    write = sorted(name for name, text in tuning["profiles"].items() if found.get(name) != text)
    plan = {"boot_now": boot, "boot": tuning["boot_profile"], "write": write,
            "kept": sorted(set(found) - set(tuning["profiles"]))}
    plan["apply"] = plan["boot"] != boot or plan["boot"] in write
    plan["job"] = bool(write) or plan["apply"]
    return plan


def plan(document):
    """What restoring document would change, against what the box has now."""
    return {"policy": _policy_plan(document["policy"]), "users": _users_plan(document["users"]),
            "tuning": _tuning_plan(document["tuning"]), "token": backups.state_token()}


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


def restore(request, pending, token, source=DRAFT, apply=True):
    """Restores the pending upload if the preview (token) still describes the box.
    Returns (plan, the policy apply job or None, the tuning job or None)."""
    document = backups.read(pending.text.encode(), request.user.get_username())
    with transaction.atomic():
        drafts.get_meta()  # exists
        Draft.objects.select_for_update().only("pk").get(pk=1)
        list(get_user_model().objects.select_for_update().values_list("pk", flat=True))
        changes = plan(document)
        if changes["token"] != token:
            raise StaleRestore()
        policy = document["policy"]
        if source == CONFIRMED and policy["confirmed"]:
            text = policy["confirmed"]["policy_text"]
        else:
            source, text = DRAFT, drafts.to_yaml(policy["draft"])
        if drafts.get().document != parse_yaml(text):
            drafts.import_text(text, request.user)
        _restore_users(document["users"])
        tuning = changes["tuning"]
        tuning_job = queue.enqueue("backup.tuning", {
            "profiles": {name: document["tuning"]["profiles"][name] for name in tuning["write"]},
            "profile": tuning["boot"], "apply": tuning["apply"]},
            request.user) if tuning["job"] else None
        draft = drafts.get()
        apply_job = None
        if apply and status_context(draft)["changes_pending"]:
            apply_job = queue.enqueue("policy.apply", {
                "policy_text": drafts.to_yaml(draft.document), "timeout": None,
                "draft_version": draft.version}, request.user)
        users = changes["users"]
        audit.record(request, "backup restore", pending.name, source=source,
                     draft_version=draft.version,
                     users={k: len(v) for k, v in users.items()}, removed=users["removed"],
                     boot_profile=tuning["boot"], profiles=tuning["write"],
                     policy_job=apply_job and apply_job.pk,
                     tuning_job=tuning_job and tuning_job.pk)
        pending.delete()
    me = get_user_model().objects.get(username=request.user.get_username())
    if me.password != request.user.password:
        update_session_auth_hash(request, me)  # the backup's password: stay signed in
    return changes, apply_job, tuning_job
