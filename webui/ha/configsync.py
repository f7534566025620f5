"""Configuration sync of an HA pair (docs/HA.md): the master's policy - its zones,
address sets, services and traffic classes - goes to the backup over the agents' channel
(core/peer.py), and the pair's commit-confirm is one: a change pending on the master is
pending on the backup with the same deadline, a confirm on the master confirms it there,
a change that rolls back on the master rolls back there too.

The master drives it, from its periodic ha.status: it compares its policy store with
what the backup reports (digests of the confirmed and the pending policy) and sends the
one step that brings the backup closer. The backup applies what it receives with the
same checks as its own policy jobs - the zones against its network, nft -c - and refuses
with the reason (an interface it lacks, a helper its kernel has not): the master shows
the mismatch and does not send that policy again; the pair never diverges in silence.
A box that is MASTER takes nothing from its peer.
"""
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

from network.core.applier import CONFIG_NAME
from policy.agent_jobs import check_network
from policy.core.applier import Applier as PolicyApplier
from policy.core.constants import CONFIRM_TIMEOUT_MAX, CONFIRM_TIMEOUT_MIN, POLICY_MAX_BYTES
from policy.core.errors import PolicyError
from policy.core.revisions import Store as PolicyStore
from tuning.core.applier import BOOT_FILE, NO_PROFILE
from tuning.forms import ProfileForm
from tusklib import children
from tusklib.commit import ZONES_CHECKED

from .core import peer as peers

TUSK_TUNE = Path(__file__).resolve().parents[1] / "bin" / "tusk-tune"

POLICY_PATH = "/v1/policy"
TUNING_PATH = "/v1/tuning"
POST_TIMEOUT = 60       # seconds the master waits for the backup to apply
TUNE_TIMEOUT = 600      # as the tuning jobs allow tusk-tune


def digest(text):
    return hashlib.sha256(text.encode()).hexdigest() if isinstance(text, str) else None


def policy_state(config):
    """This box's policy as its peer compares it: digests of the confirmed and the
    pending policy, the pending one's deadline."""
    store = PolicyStore(config.state_dir)
    confirmed, pending = store.confirmed_id(), store.pending()
    return {"confirmed": digest(store.get(confirmed).policy_text) if confirmed else None,
            "pending": digest(store.get(pending["revision"]).policy_text) if pending else None,
            "deadline": pending["deadline"] if pending else None}


def _texts(config):
    """(confirmed text, pending text, pending deadline) of this box's policy store."""
    store = PolicyStore(config.state_dir)
    confirmed, pending = store.confirmed_id(), store.pending()
    return (store.get(confirmed).policy_text if confirmed else None,
            store.get(pending["revision"]).policy_text if pending else None,
            pending["deadline"] if pending else None)


def tuning_state(config):
    """This box's tuning profile as its peer compares it: the last applied profile's name,
    "none" after a roll back, None when none was ever applied (tusk-tune's boot-profile:
    what the box applies at start-up)."""
    try:
        with open(os.path.join(config.tuning_state_dir, BOOT_FILE), encoding="utf-8") as f:
            return f.read(200).strip() or None
    except OSError:
        return None


def tusk_tune(config, *argv):
    """tusk-tune --json on this box's target (the tuning jobs' call, without their
    report rows: a step from the peer is recorded in tusk-tune's own state) -> its JSON;
    ChildFailed or TimeoutExpired when it fails."""
    call = [sys.executable, str(TUSK_TUNE), "--json", "--state-dir", config.tuning_state_dir,
            "--policy-dir", config.state_dir]
    if config.netns:
        call += ["--netns", config.netns, "--network",
                 os.path.join(config.network_state_dir, CONFIG_NAME)]
    return children.run_json(call + list(argv), TUNE_TIMEOUT)


# -- the backup's side -------------------------------------------------------------------

def take_tuning(config, role, request):
    """The master's tuning profile -> (HTTP status, JSON-able). request: {"profile": a
    profile's name, or "none" (rolled back on the master)}; checked as the Tuning page's
    form checks it: one of the profiles this box has."""
    if role == "MASTER":
        return 409, {"error": "this box is the master: it takes no configuration from its "
                              "peer"}
    if not isinstance(request, dict) or set(request) != {"profile"}:
        return 400, {"error": "the request must be a table with the key profile alone"}
    name = request["profile"]
    try:
        if name == NO_PROFILE:
            tusk_tune(config, "rollback")
        else:
            form = ProfileForm({"profile": name if isinstance(name, str) else ""})
            if not form.is_valid():
                return 422, {"error": "; ".join(f"{field}: {' '.join(errors)}"
                                                for field, errors in form.errors.items())}
            tusk_tune(config, "apply", "--", form.cleaned_data["profile"])
    except subprocess.TimeoutExpired:
        return 422, {"error": f"tusk-tune did not finish in {TUNE_TIMEOUT} s"}
    except children.ChildFailed as error:
        return 422, {"error": error.stderr.strip()[-2000:] or f"tusk-tune {error.reason}"}
    return 200, {"profile": tuning_state(config)}



def take_policy(config, role, peer_address, request):
    """One step from the master -> (HTTP status, JSON-able). request: {"action": "apply",
    "text", "timeout" | "confirm": true} | {"action": "confirm", "digest"} |
    {"action": "cancel"}; checked as any job's arguments are."""
    if role == "MASTER":
        return 409, {"error": "this box is the master: it takes no configuration from its "
                              "peer"}
    if not isinstance(request, dict):
        return 400, {"error": "the request must be a table"}
    action = request.get("action")
    known = {"apply": {"action", "text", "timeout", "confirm"}, "confirm": {"action", "digest"},
             "cancel": {"action"}}
    if action not in known:
        return 400, {"error": f"action: {action!r} is not apply, confirm or cancel"}
    unknown = sorted(str(key)[:40] for key in request if key not in known[action])
    if unknown:
        return 400, {"error": f"{unknown[0]}: unknown key"}
    applier = PolicyApplier(config.state_dir, config.netns or None)
    user = f"HA peer {peer_address}"
    try:
        if action == "apply":
            text, confirm = request.get("text"), request.get("confirm", False)
            if not isinstance(text, str) or len(text.encode()) > POLICY_MAX_BYTES:
                return 400, {"error": f"text: must be a policy of at most "
                                      f"{POLICY_MAX_BYTES >> 20} MiB"}
            if not isinstance(confirm, bool):
                return 400, {"error": "confirm: must be true or false"}
            timeout = CONFIRM_TIMEOUT_MAX if confirm else request.get("timeout")
            with ZONES_CHECKED:
                check_network(config, text)
                revision = applier.apply(text, user=user, timeout=timeout,
                                         action="HA sync from the master")
                if confirm:
                    revision = applier.confirm(user=user)
        elif action == "confirm":
            pending = applier.store.pending()
            wanted = request.get("digest")
            if pending is None or digest(
                    applier.store.get(pending["revision"]).policy_text) != wanted:
                return 409, {"error": "the pending policy is not the one the master confirmed"}
            revision = applier.confirm(user=user)
        else:
            revision = applier.cancel(user=user)
    except PolicyError as error:
        return 422, {"error": str(error), "problems": [
            {"path": p.path, "message": p.message} for p in error.problems]}
    return 200, {"revision": revision.id, "outcome": revision.outcome}


# -- the master's side -------------------------------------------------------------------

class Sync:
    """The master's view of the last steps: what it sent and what the backup said, so that
    a policy or a profile the backup refused is not sent again (until it changes)."""

    def __init__(self):
        self.refused = {}      # (action, digest) or ("tuning", name) -> the backup's reason
        self.last = None       # the last step sent, and its answer

    def tuning_step(self, config, ha, key, peer_profile):
        """The backup's tuning profile brought to the master's; -> {"state", "detail"}."""
        ours = tuning_state(config)
        if ours is None:
            return {"state": "in sync", "detail": "no profile applied on this box: each box "
                                                  "keeps its own"}
        if peer_profile == ours:
            return {"state": "in sync", "detail": f"profile {ours} on both"}
        marker = ("tuning", ours)
        if marker in self.refused:
            return {"state": "refused", "detail": self.refused[marker]}
        try:
            status, answer = peers.ask(ha.peer_address, key, "POST", TUNING_PATH,
                                       {"profile": ours}, netns=config.netns or None,
                                       timeout=TUNE_TIMEOUT + 30)
        except peers.PeerError as error:
            return {"state": "syncing", "detail": str(error)}
        reason = answer.get("error", "") if isinstance(answer, dict) else ""
        if status == 200:
            return {"state": "syncing", "detail": f"profile {ours} applied on the backup"}
        if status == 422:
            self.refused[marker] = f"the backup refused profile {ours}: {reason}"
            return {"state": "refused", "detail": self.refused[marker]}
        return {"state": "syncing", "detail": f"the backup answered HTTP {status}: {reason}"}

    def step(self, config, ha, key, peer_policy):
        """The one step that brings the backup closer, sent; -> {"state": "in sync" |
        "syncing" | "refused", "detail"}."""
        confirmed, pending, deadline = _texts(config)
        ours = {"confirmed": digest(confirmed), "pending": digest(pending)}
        theirs = peer_policy if isinstance(peer_policy, dict) else {}
        if pending is not None:
            if theirs.get("pending") == ours["pending"]:
                return {"state": "in sync", "detail": "the pending policy is pending on both"}
            left = int(deadline - time.time()) if deadline else 0
            if left < CONFIRM_TIMEOUT_MIN:
                return {"state": "syncing", "detail": "too little time left to send the "
                                                      "pending policy"}
            request = {"action": "apply", "text": pending, "timeout": left}
        elif confirmed is None:
            return {"state": "in sync" if not theirs.get("pending") else "syncing",
                    "detail": "no policy confirmed on this box yet"}
        elif theirs.get("pending") is not None:
            request = ({"action": "confirm", "digest": ours["confirmed"]}
                       if theirs["pending"] == ours["confirmed"] else {"action": "cancel"})
        elif theirs.get("confirmed") != ours["confirmed"]:
            request = {"action": "apply", "text": confirmed, "confirm": True}
        else:
            return {"state": "in sync", "detail": "the same policy is confirmed on both"}
        marker = (request["action"], digest(request.get("text")) or request.get("digest"))
        if marker in self.refused:
            return {"state": "refused", "detail": self.refused[marker]}
        try:
            status, answer = peers.ask(ha.peer_address, key, "POST", POLICY_PATH, request,
                                       netns=config.netns or None, timeout=POST_TIMEOUT)
        except peers.PeerError as error:
            return {"state": "syncing", "detail": str(error)}
        self.last = {"request": request["action"], "status": status,
                     "answer": answer, "at": time.time()}
        if status == 200:
            return {"state": "syncing", "detail": f"the backup's revision "
                                                  f"{answer.get('revision')}: "
                                                  f"{answer.get('outcome')}"}
        reason = answer.get("error", "no reason given") if isinstance(answer, dict) else ""
        if status == 422:
            self.refused[marker] = f"the backup refused the policy: {reason}"
            return {"state": "refused", "detail": self.refused[marker]}
        return {"state": "syncing", "detail": f"the backup answered HTTP {status}: {reason}"}
