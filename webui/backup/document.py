"""The backup file: one JSON document, format "tusk-backup", version 2.

    {"format": "tusk-backup", "version": 2, "created": "2026-…+00:00",
     "tusk_version": "…" or null, "hostname": "fw1",
     "policy": {"draft": {…the draft, as policy.Draft keeps it…},
                "confirmed": null or {"revision": 7, "created": "…", "user": "alice",
                                      "policy_text": "…policy.yaml of that revision…"}},
     "tuning": {"boot_profile": "throughput" or "none",
                "profiles": {"name": "…the operator's profile file…"}},
     "users": [{"username": "alice", "role": "admin", "password_hash": "pbkdf2_sha256$…",
                "active": true, "must_change_password": false}],
     "network": null or {"draft": {…network.toml's structure, as network.Draft keeps it…},
                         "confirmed": null or {"revision": 3 or null,
                                               "document": {…the confirmed network.toml…}}}}

Version 1 (before the network section) is read too: restoring it leaves the network as
it is. network is null when the box had no network configuration to carry.

collect.py's build() writes it from what the box has now; parse() and check() here read
one back and
report every problem with the path of its field (`users[2].role: unknown role
"root" (known: admin, viewer)`), the policies through the policy engine's normalise
stage, the tuning profiles through tusk-tune's parser and the network configurations
through the network core (`network.draft.vlans[1].id: ...`). Only JSON is read: no
pickle, no YAML, a bounded size, duplicate keys refused.
"""
import json
import os
import re
import tempfile
from datetime import datetime
from enum import IntEnum

from django.conf import settings
from django.contrib.auth.hashers import UNUSABLE_PASSWORD_PREFIX, identify_hasher

from accounts.models import Role
from network.core import normalise as networks
from network.core.errors import NetworkError
from policy.core.errors import PolicyError, quoted
from policy.core.normalise import load_policy, load_policy_text
from tuning.core import profile as profiles
from tuning.core.applier import NO_PROFILE
from tuning.core.errors import TuneError
from tusklib import jsonread
from tusklib.problems import Problem, Problems

FORMAT = "tusk-backup"
VERSION = 2
READS = (1, 2)                      # version 1: no network section
MAX_BYTES = 16 * 1024 * 1024        # as a policy import (nginx's body limit is 17m)
MAX_PROFILE_BYTES = 64 * 1024       # one tuning profile file
MAX_USERS = 1000
MAX_PROBLEMS = 100                  # reported; the rest are counted
USERNAME = re.compile(r"^[\w.@+-]{1,150}\Z")  # Django's user names (the users page: fewer)
VERSION_FILE = settings.BASE_DIR.parent / "version"  # /usr/lib/tusk/version (webui/install-into)
NOT_INCLUDED = ("packet captures and their reports", "self-test results", "job history",
                "the audit log", "statistics", "the revision history",
                "the device's own files: tusk.toml, the TLS certificate")
TOP_KEYS = ("format", "version", "created", "tusk_version", "hostname", "policy", "tuning",
            "users")
TOP_KEYS_2 = TOP_KEYS + ("network",)
USER_KEYS = ("username", "role", "password_hash", "active", "must_change_password")


class Code(IntEnum):
    """What is wrong with a backup. No CLI reads one, so the numbers only keep these
    codes apart from the other domains' (tusklib.problems)."""

    FILE = 50       # too large, not UTF-8 JSON, not a Tusk backup or not this version
    SCHEMA = 51     # an unknown or missing key, or a value of the wrong type
    VALUE = 52      # a value of the right type that cannot be restored
    POLICY = 53     # the policy engine refuses a policy in it
    TUNING = 54     # tusk-tune refuses a profile in it, or its boot profile
    IO = 55         # a file of this box cannot be read (making a backup)
    NETWORK = 56    # the network core refuses a network configuration in it


class BackupError(Problems):
    """Every problem found, each with the path of its field; nothing was changed."""

    codes = Code


# -- what the box has now ------------------------------------------------------------------

def parse(data):
    """The bytes of an uploaded file -> the JSON document, or BackupError. What json
    cannot read, or reads into what cannot be stored (a number of 5000 digits, 1e999999,
    a key twice, bytes that are not UTF-8), is named with its line and column
    (tusklib/jsonread.py)."""
    if len(data) > MAX_BYTES:
        raise BackupError(Code.FILE, "", f"the file has {len(data)} bytes: a backup is at "
                                         f"most {MAX_BYTES // (1024 * 1024)} MiB")
    try:
        document = jsonread.load_bytes(data)
    except jsonread.JsonError as error:
        raise BackupError(Code.FILE, "", error.described()) from None
    found = _unstorable_at(document)
    if found is not None:
        raise BackupError(Code.VALUE, *found)
    return document


_HALF_PAIR = re.compile("[\ud800-\udfff]")


def _unstorable(text):
    """Why PostgreSQL (and UTF-8) cannot store text, else None."""
    if "\x00" in text:
        return "holds a NUL character (\\u0000)"
    half = _HALF_PAIR.search(text)
    if half is not None:   # "\ud800" in JSON: half of a pair, no character of its own
        return f"holds half of a UTF-16 surrogate pair (\\u{ord(half.group()):04x}), which " \
               "is no character"
    return None


def _unstorable_at(document):
    """(path, why) of the first string (or key) that cannot be stored, else None."""
    stack = [("", document)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            why = _unstorable(value)
            if why is not None:
                return path, why
        elif isinstance(value, dict):
            for key, item in value.items():
                stack += [(_join(path, ascii(key) if _unstorable(key) else key), key),
                          (_join(path, key), item)]
        elif isinstance(value, list):
            stack += [(f"{path}[{index}]", item) for index, item in enumerate(value)]
    return None


def _kind(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    return {dict: "an object", list: "a list", str: "a string", int: "a number",
            float: "a number"}.get(type(value), type(value).__name__)


def _join(path, key):
    return f"{path}.{key}" if path else key


class _Checker:
    """Walks the document once, collecting every problem."""

    def __init__(self):
        self.problems = []

    def problem(self, path, message, code=Code.VALUE):
        self.problems.append(Problem(code, path, message))

    def object(self, value, path, keys):
        """value as a dict with exactly keys, or None."""
        if not isinstance(value, dict):
            self.problem(path, f"expected an object, got {_kind(value)}", Code.SCHEMA)
            return None
        for key in value:
            if key not in keys:
                self.problem(_join(path, key), f"unknown key (known: {', '.join(keys)})",
                             Code.SCHEMA)
        for key in keys:
            if key not in value:
                self.problem(_join(path, key), "missing", Code.SCHEMA)
        return value

    def typed(self, mapping, key, path, kinds, what, nullable=False):
        """mapping[key] if it is one of kinds (bool is never an int here)."""
        if key not in mapping:
            return None
        value = mapping[key]
        if value is None and nullable:
            return None
        if isinstance(value, bool) != (bool in kinds) or not isinstance(value, kinds):
            self.problem(_join(path, key), f"expected {what}, got {_kind(value)}", Code.SCHEMA)
            return None
        return value

    def string(self, mapping, key, path, limit, nullable=False):
        value = self.typed(mapping, key, path, (str,), "a string", nullable)
        if value is not None and len(value) > limit:
            self.problem(_join(path, key), f"longer than {limit} characters")
            return None
        return value

    def policy_problems(self, path, error, in_text=False):
        """The engine's problems under path: a document's fields continue the path
        (policy.draft.classes[3].mss.value); a text's are named in the message."""
        for problem in error.problems:
            if in_text:
                self.problem(path, str(problem), Code.POLICY)
            else:
                self.problem(_join(path, problem.path), problem.message, Code.POLICY)

    # -- the parts ----------------------------------------------------------------------

    def header(self, document):
        """False when the rest is not worth reading (not a backup, or a newer one)."""
        if not isinstance(document, dict):
            self.problem("", f"not a Tusk backup: expected a JSON object, got {_kind(document)}",
                         Code.FILE)
            return False
        if document.get("format") != FORMAT:
            self.problem("format", f"not a Tusk backup: expected {FORMAT!r}, got "
                                   f"{quoted(document.get('format'))}", Code.FILE)
            return False
        version = document.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            self.problem("version", f"expected a whole number, got {quoted(version)}",
                         Code.FILE)
            return False
        if version not in READS:
            self.problem("version", f"version {version} is not readable here: this Tusk reads "
                                    f"backup versions {READS[0]} to {READS[-1]}", Code.FILE)
            return False
        self.object(document, "", TOP_KEYS if version == 1 else TOP_KEYS_2)
        created = self.string(document, "created", "", 64)
        if created is not None:
            try:
                datetime.fromisoformat(created)
            except ValueError:
                self.problem("created", f"{created!r} is not a date and time (ISO 8601)")
        self.string(document, "tusk_version", "", 200, nullable=True)
        self.string(document, "hostname", "", 253)
        return True

    def policy(self, value):
        policy = self.object(value, "policy", ("draft", "confirmed"))
        if policy is None:
            return
        if "draft" in policy:
            if not isinstance(policy["draft"], dict):
                self.problem("policy.draft", f"expected an object, got "
                                             f"{_kind(policy['draft'])}", Code.SCHEMA)
            else:
                try:
                    load_policy(policy["draft"])
                except PolicyError as error:
                    self.policy_problems("policy.draft", error)
        confirmed = policy.get("confirmed")
        if confirmed is None:
            return
        path = "policy.confirmed"
        if self.object(confirmed, path, ("revision", "created", "user", "policy_text")) is None:
            return
        revision = self.typed(confirmed, "revision", path, (int,), "a revision number")
        if revision is not None and revision < 1:
            self.problem(f"{path}.revision", f"{revision} is not a revision number")
        self.string(confirmed, "created", path, 64)
        self.string(confirmed, "user", path, 150)
        text = self.string(confirmed, "policy_text", path, MAX_BYTES)
        if text is not None:
            try:
                load_policy_text(text)
            except PolicyError as error:
                self.policy_problems(f"{path}.policy_text", error, in_text=True)

    def tuning(self, value):
        tuning = self.object(value, "tuning", ("boot_profile", "profiles"))
        if tuning is None:
            return
        name = self.string(tuning, "boot_profile", "tuning", 64)
        found = tuning.get("profiles")
        if "profiles" in tuning and not isinstance(found, dict):
            self.problem("tuning.profiles", f"expected an object, got {_kind(found)}",
                         Code.SCHEMA)
            found = None
        self.problems += tuning_problems(found or {}, name)

    def network(self, value):
        """null, or the draft and the confirmed configuration, each checked whole by the
        network core as the Network pages check a draft - but not against this box's
        ports, which a restore maps first (restore.py)."""
        if value is None:
            return
        network = self.object(value, "network", ("draft", "confirmed"))
        if network is None:
            return
        if "draft" in network:
            self.network_document(network["draft"], "network.draft")
        confirmed = network.get("confirmed")
        if confirmed is None:
            return
        path = "network.confirmed"
        if self.object(confirmed, path, ("revision", "document")) is None:
            return
        revision = self.typed(confirmed, "revision", path, (int,), "a revision number or "
                              "null", nullable=True)
        if revision is not None and revision < 1:
            self.problem(f"{path}.revision", f"{revision} is not a revision number")
        if "document" in confirmed:
            self.network_document(confirmed["document"], f"{path}.document")

    def network_document(self, document, path):
        if not isinstance(document, dict):
            self.problem(path, f"expected an object, got {_kind(document)}", Code.SCHEMA)
            return
        size = len(json.dumps(document))
        if size > networks.TEXT_MAX:  # the agent's network.apply refuses it
            self.problem(path, f"{size >> 10} KiB; a network configuration is at most "
                               f"{networks.TEXT_MAX >> 10} KiB")
            return
        try:
            networks.from_document(document)
        except NetworkError as error:
            for problem in error.problems:
                self.problem(_join(path, problem.path) if problem.path else path,
                             problem.message, Code.NETWORK)

    def users(self, value, restoring):
        if not isinstance(value, list):
            self.problem("users", f"expected a list, got {_kind(value)}", Code.SCHEMA)
            return
        if not 1 <= len(value) <= MAX_USERS:
            self.problem("users", f"{len(value)} users: a backup has 1 to {MAX_USERS}")
            return
        seen, admins, before = {}, [], len(self.problems)
        for index, entry in enumerate(value):
            path = f"users[{index}]"
            if self.object(entry, path, USER_KEYS) is None:
                continue
            name = self.string(entry, "username", path, 150)
            if name is not None:
                if not USERNAME.match(name):
                    self.problem(f"{path}.username", f"{name!r} is not a user name (letters, "
                                                     "digits and @ . + - _ only)")
                elif name.lower() in seen:
                    self.problem(f"{path}.username", f"{name!r} is already "
                                                     f"users[{seen[name.lower()]}]")
                else:
                    seen[name.lower()] = index
            role = self.string(entry, "role", path, 16)
            if role is not None and role not in Role.values:
                self.problem(f"{path}.role", f"unknown role \"{role}\" (known: "
                                             f"{', '.join(Role.values)})")
            self.password_hash(entry, path)
            active = self.typed(entry, "active", path, (bool,), "true or false")
            self.typed(entry, "must_change_password", path, (bool,), "true or false")
            if role == Role.ADMIN and active and name:
                admins.append(name)
        if len(self.problems) > before:
            return  # the entries first: who is an admin is not known for sure
        if not admins:
            self.problem("users", "no active admin: after the restore nobody could change "
                                  "anything")
        elif restoring is not None and restoring not in admins:
            self.problem("users", f"your account \"{restoring}\" is not an active admin in this "
                                  "backup: restoring it would lock you out. Restore it as one of "
                                  f"its admins ({', '.join(admins) or 'none'}), or add yourself "
                                  "to the backup's users as an active admin")

    def password_hash(self, entry, path):
        value = self.string(entry, "password_hash", path, 512)
        if value is None or value.startswith(UNUSABLE_PASSWORD_PREFIX):
            return  # a user without a usable password (set by Django, never a password)
        try:
            hasher = identify_hasher(value)
        except ValueError:
            algorithm = value.split("$", 1)[0] if "$" in value else ""
            self.problem(f"{path}.password_hash", (
                f"hashed with \"{quoted(algorithm)[1:-1]}\", which this Tusk does not know"
                if algorithm else "not a password hash (a backup holds hashes, never passwords)"))
            return
        try:
            hasher.decode(value)
        except Exception:  # each hasher fails its own way on a mangled hash
            self.problem(f"{path}.password_hash", f"not a well-formed {hasher.algorithm} hash")


def tuning_problems(found, boot):
    """Problems of tuning profiles {name: text} and the boot profile's name, each
    profile loaded by tusk-tune's parser as if it were in the operator's directory
    (where a restore puts it). The web process checks a backup with it; the agent
    again before it writes a file."""
    problems = []
    with tempfile.TemporaryDirectory(prefix="tusk-backup-") as directory:
        valid = {}
        for name, text in found.items():
            path = f"tuning.profiles.{name}"
            if not profiles.NAME.match(name):
                problems.append(Problem(Code.TUNING, f"tuning.profiles.{quoted(name)}",
                                        "not a profile name (letters, digits and . _ -, "
                                        "at most 64)"))
            elif not isinstance(text, str):
                problems.append(Problem(Code.SCHEMA, path,
                                        f"expected the profile's text, got {_kind(text)}"))
            elif len(text.encode()) > MAX_PROFILE_BYTES:
                problems.append(Problem(Code.TUNING, path,
                                        f"larger than {MAX_PROFILE_BYTES // 1024} KiB"))
            else:
                with open(os.path.join(directory, f"{name}.conf"), "w", encoding="utf-8") as f:
                    f.write(text)
                valid[name] = path
        dirs = [directory, profiles.OPERATOR_DIR, profiles.SHIPPED_DIR]
        for name, path in valid.items():
            try:
                profiles.load(name, dirs)
            except TuneError as error:
                for problem in error.problems:
                    place = problem.path.replace(directory + os.sep, "")
                    problems.append(Problem(Code.TUNING, path, f"{place}: {problem.message}"
                                            if place else problem.message))
        if boot is not None and boot != NO_PROFILE:
            if not profiles.NAME.match(boot):
                problems.append(Problem(Code.TUNING, "tuning.boot_profile",
                                        f"{quoted(boot)} is not a profile name"))
            elif boot not in profiles.available(dirs):
                known = ", ".join([NO_PROFILE, *profiles.available(dirs)])
                problems.append(Problem(Code.TUNING, "tuning.boot_profile", f"no profile "
                                        f"{boot!r} in the backup or on this box (known: "
                                        f"{known})"))
    return problems


def check(document, restoring=None):
    """Raises BackupError with every problem of a parsed backup. restoring: the user
    name of the admin restoring it, who must stay an active admin."""
    checker = _Checker()
    if checker.header(document):
        if "policy" in document:
            checker.policy(document["policy"])
        if "tuning" in document:
            checker.tuning(document["tuning"])
        if "users" in document:
            checker.users(document["users"], restoring)
        if "network" in document and document["version"] != 1:
            checker.network(document["network"])
    if checker.problems:
        problems = checker.problems
        if len(problems) > MAX_PROBLEMS:
            problems = problems[:MAX_PROBLEMS] + [
                Problem(problems[MAX_PROBLEMS].code, "",
                        f"and {len(problems) - MAX_PROBLEMS} more problems")]
        raise BackupError(problems)
    return document


def read(data, restoring=None):
    return check(parse(data), restoring)
