"""What a backup holds, collected from the box as it is now (document.py has the format
and reads one back): the policy's draft and confirmed revision, the tuning profiles, the
users, the network's draft and confirmed configuration. state_token() is a digest of all
of it, so a restore planned against one state is refused once the box changed."""
import hashlib
import json
import socket

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone

from accounts.roles import role_of
from network.core import normalise as networks
from network.core.errors import NetworkError
from network.models import Draft as NetworkDraft
from network.models import NetworkState
from policy import draft as drafts
from policy.models import Revision, TargetState
from tuning.core import profile as profiles
from tuning.core.applier import Tuner

from .document import FORMAT, MAX_PROFILE_BYTES, VERSION, VERSION_FILE, BackupError, Code


def tusk_version():
    try:
        return VERSION_FILE.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def boot_profile():
    """What tusk-tune boot applies: the last applied profile, none after a rollback."""
    directory = settings.TUSK.tuning_state_dir
    try:
        return Tuner(None, directory).boot_profile()
    except OSError as error:
        raise BackupError(Code.IO, "tuning.boot_profile", f"cannot read "
                          f"{directory}/boot-profile: {error.strerror}") from None


def operator_profiles():
    """{name: text} of the operator's own tuning profiles (profiles.OPERATOR_DIR)."""
    found = {}
    for name, path in profiles.available([profiles.OPERATOR_DIR]).items():
        try:
            with open(path, encoding="utf-8") as handle:
                found[name] = handle.read(MAX_PROFILE_BYTES + 1)
        except (OSError, UnicodeDecodeError) as error:
            raise BackupError(Code.IO, f"tuning.profiles.{name}", f"cannot read {path}: "
                              f"{getattr(error, 'strerror', None) or error}") from None
        if len(found[name].encode()) > MAX_PROFILE_BYTES:
            raise BackupError(Code.IO, f"tuning.profiles.{name}", f"{path} is larger than "
                              f"{MAX_PROFILE_BYTES // 1024} KiB")
    return found


def users():
    people = get_user_model().objects.order_by("username").select_related("profile")
    return [{"username": user.username, "role": str(role_of(user)),
             "password_hash": user.password, "active": user.is_active,
             "must_change_password": bool(getattr(getattr(user, "profile", None),
                                                  "must_change_password", False))}
            for user in people]


def confirmed_revision():
    state = TargetState.objects.filter(pk=1).first()
    if state is None or state.confirmed is None:
        return None
    return Revision.objects.filter(number=state.confirmed).first()


def network():
    """The network draft and the confirmed configuration (the file the agent mirrors,
    as a document), or None when the box has neither: nothing to carry then (a draft is
    not made up here from the ports, as the Network pages do, for a backup)."""
    state = NetworkState.objects.filter(pk=1).first()
    confirmed = None
    if state is not None and state.confirmed_text:
        try:
            config = networks.parse(state.confirmed_text, "network.toml")
        except NetworkError as error:
            raise BackupError(Code.IO, "network.confirmed", f"the confirmed configuration "
                              f"cannot be read: {error}") from None
        confirmed = {"revision": state.confirmed, "document": networks.to_document(config)}
    draft = NetworkDraft.objects.filter(pk=1).values_list("document", flat=True).first()
    if draft is None and confirmed is None:
        return None
    return {"draft": confirmed["document"] if draft is None else draft,
            "confirmed": confirmed}


def contents():
    """The parts a restore puts back: policy, tuning, users, network."""
    revision = confirmed_revision()
    confirmed = None if revision is None else {
        "revision": revision.number, "created": revision.created.isoformat(),
        "user": revision.user, "policy_text": revision.policy_text}
    return {"policy": {"draft": drafts.get().document, "confirmed": confirmed},
            "tuning": {"boot_profile": boot_profile(), "profiles": operator_profiles()},
            "users": users(), "network": network()}


def build():
    return {"format": FORMAT, "version": VERSION,
            "created": timezone.now().isoformat(timespec="seconds"),
            "tusk_version": tusk_version(), "hostname": socket.gethostname(), **contents()}


def dump(document):
    return (json.dumps(document, indent=1, ensure_ascii=False) + "\n").encode()


def state_token():
    """A hash of what a restore replaces (drafts, users, tuning): a preview is confirmed
    only while it still describes what is there."""
    now = contents()
    now["policy"] = {"draft_version": drafts.get_meta().version}
    now["network"] = {"draft_version": NetworkDraft.objects.filter(pk=1).values_list(
        "version", flat=True).first()}
    return hashlib.sha256(json.dumps(now, sort_keys=True).encode()).hexdigest()


# -- reading one back ----------------------------------------------------------------------
