"""apply / verify / rollback, with the state that makes them safe.

state_dir/applied.json records, for the current boot (its boot_id), every value
tusk-tune changed with the value it had before the first change (saved before the
write happens), and what it set. Values in /sys and /proc do not survive a reboot,
so a file from an earlier boot means nothing is applied now.

state_dir/boot-profile is what `tusk-tune boot` applies at start-up: the last
applied profile, "none" after a rollback, absent (the default profile) on a new box.

An apply checks everything before it writes (the planner raises first). A write the
kernel refuses as unsupported is skipped with a warning; any other failure undoes
this apply's writes, newest first, and raises.

What the planner checked is checked once more here, on the paths about to be written
(write_refused): a file under /sys/class/net, /proc/irq or /proc/sys, no part of it
. or .., and a sysctl one that profile.sysctl_path_refused allows - the check that a
profile's [sysctl] names pass. An apply with one such write writes nothing; a rollback
skips it (the state file is root's, but it is the one input here no planner made).
"""
import datetime
import fcntl
import json
import os
from contextlib import contextmanager
from dataclasses import dataclass, field

from tusklib.problems import Problem

from . import hardware, planner
from . import profile as profiles
from .errors import Code, TuneError
from .host import Unsupported
from .report import Write, same

WRITABLE = ("/sys/class/net/", "/proc/irq/", planner.SYSCTL_ROOT + "/")
STATE_FILE = "applied.json"
BOOT_FILE = "boot-profile"
NO_PROFILE = "none"


@dataclass
class Result:
    plan: object = None
    written: list = field(default_factory=list)      # Write objects
    skipped: list = field(default_factory=list)      # (label, why)
    drift: list = field(default_factory=list)        # (label, expected, found)
    checked: int = 0
    profile: str = ""
    message: str = ""
    failed: object = None                             # the Write being set last

    def as_dict(self):
        return {"profile": self.profile, "message": self.message,
                "plan": self.plan.as_dict() if self.plan else None,
                "written": [w.as_dict() for w in self.written],
                "skipped": [{"label": label, "why": why} for label, why in self.skipped],
                "drift": [{"label": label, "expected": e, "found": f}
                          for label, e, f in self.drift],
                "checked": self.checked}


def current_value(host, write, cache):
    """What the knob a Write sets holds now."""
    if write.kind == "file":
        value = host.read(write.target[0])
        return None if value is None else " ".join(value.split())
    iface, section, key = write.target
    if iface not in cache:
        cache[iface] = host.ethtool(iface)
    state = cache[iface].get(section)
    if state is None:
        return None
    if section == "features":
        return state.get(key, {}).get("on")
    if section == "pause":
        return state.get(key)
    return state["current"].get(key)


def write_refused(write):
    """Why tusk-tune does not make this write, or None. ethtool's are the interfaces'
    settings; a file must be one the planner writes, a sysctl one a profile may set."""
    if write.kind != "file":
        return None
    path = write.target[0] if len(write.target) == 1 else None
    if not isinstance(path, str) or not path.startswith(WRITABLE) \
            or not all(profiles.path_part(part) for part in path.split("/")[1:]):
        return f"not a path tusk-tune writes (only below {', '.join(WRITABLE)})"
    if path.startswith(WRITABLE[2]):
        sysctl = path.split("/")[3:]
        why = profiles.sysctl_path_refused(sysctl)
        if why:
            return f"{profiles.sysctl_name(sysctl)} is {why}"
    return None


def check_writes(plan):
    """Raises, naming each, if the plan has a write tusk-tune does not make."""
    problems = [Problem(Code.PROFILE, write.label, why) for write in plan.writes
                if (why := write_refused(write))]
    if problems:
        raise TuneError(problems)


class Tuner:
    def __init__(self, host, state_dir, profile_dirs=None, paths=(), network=None):
        """paths and network: the live policy's paths and the box's network configuration,
        for the MTU check (planner.Planner)."""
        self.host = host
        self.state_dir = state_dir
        self.profile_dirs = profile_dirs
        self.paths = paths
        self.network = network

    # -- reading --------------------------------------------------------------------

    def profile(self, name):
        return profiles.load(name, self.profile_dirs)

    def detect(self, profile=None):
        named = list(profile.interfaces()) if profile else []
        return hardware.detect(self.host, include_virtual=named)

    def plan(self, name):
        profile = self.profile(name)
        return planner.plan(profile, self.detect(profile), self.host, self.paths,
                            self.network)

    # -- state ----------------------------------------------------------------------

    @contextmanager
    def locked(self):
        try:
            os.makedirs(self.state_dir, exist_ok=True)
            handle = open(os.path.join(self.state_dir, "lock"), "w")
        except OSError as error:
            raise TuneError(Code.IO, self.state_dir, f"cannot use it: {error.strerror}") from None
        with handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield

    def _path(self, name):
        return os.path.join(self.state_dir, name)

    def state(self):
        """The current boot's applied state, or None."""
        try:
            with open(self._path(STATE_FILE), encoding="utf-8") as handle:
                state = json.load(handle)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            raise TuneError(Code.STATE, self._path(STATE_FILE),
                            f"unreadable ({error}); remove it to start afresh") from None
        if state.get("boot_id") != self.host.boot_id():
            return None
        return state

    def _save(self, state):
        path = self._path(STATE_FILE)
        temporary = path + ".new"
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(state, handle, indent=1)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)

    def boot_profile(self):
        """The profile `boot` applies: the last applied one, none after a rollback."""
        try:
            with open(self._path(BOOT_FILE), encoding="utf-8") as handle:
                return handle.read().strip() or profiles.DEFAULT_PROFILE
        except FileNotFoundError:
            return profiles.DEFAULT_PROFILE

    def _set_boot_profile(self, name):
        path = self._path(BOOT_FILE)
        with open(path + ".new", "w", encoding="utf-8") as handle:
            handle.write(name + "\n")
        os.replace(path + ".new", path)

    # -- apply ----------------------------------------------------------------------

    def apply(self, name):
        profile = self.profile(name)
        plan = planner.plan(profile, self.detect(profile), self.host, self.paths,
                            self.network)
        check_writes(plan)
        with self.locked():
            before = self.state()
            state = json.loads(json.dumps(before)) if before else {
                "boot_id": self.host.boot_id(), "originals": [], "applied": {}}
            result = Result(plan=plan, profile=profile.name)
            done = []
            try:
                first = [w for w in plan.writes if w.phase == 1]
                for write in first:
                    self._write(write, state, done, result)
                if done:
                    # the kernel has made (or removed) queues: plan them as they are now
                    plan = planner.plan(profile, self.detect(profile), self.host,
                                        self.paths, self.network)
                    check_writes(plan)
                    plan.writes[:0] = first
                    result.plan = plan
                for write in plan.writes:
                    if write.phase == 2:
                        self._write(write, state, done, result)
            except TuneError:
                # the plan after the channel change has a problem: back to before it
                self._restore(done, before)
                raise
            except OSError as error:
                undone = self._restore(done, before)
                failed = result.failed
                raise TuneError(Code.WRITE, failed.label,
                                f"setting {failed.show(failed.new)} failed: "
                                f"{error.strerror or error}; the {len(done)} values this apply "
                                f"had set were restored{undone}") from None
            state["profile"] = profile.name
            state["applied_at"] = datetime.datetime.now().isoformat(timespec="seconds")
            self._save(state)
            self._set_boot_profile(profile.name)
        for label, why in result.skipped:
            plan.warn("unsupported", f"{label}: {why}: skipped")
        return result

    def _write(self, write, state, done, result):
        key = write.label
        if not any(o["label"] == key for o in state["originals"]):
            state["originals"].append(write.as_dict())
            self._save(state)
        result.failed = write
        try:
            self._set(write, write.new)
        except Unsupported as why:
            result.skipped.append((key, str(why)))
            return
        done.append(write)
        result.written.append(write)
        state["applied"][key] = write.as_dict()

    def _set(self, write, value):
        if write.kind == "file":
            self.host.write(write.target[0], value)
        else:
            iface, section, key = write.target
            self.host.ethtool_set(iface, section, key, value)

    def _restore(self, done, before):
        """Undoes this apply's writes and its state; -> what could not be undone."""
        undone = self._undo(done)
        if before:
            self._save(before)
        elif os.path.exists(self._path(STATE_FILE)):
            os.unlink(self._path(STATE_FILE))
        return undone

    def _undo(self, done):
        failures = []
        for write in reversed(done):
            if write.old is None:
                continue
            try:
                self._set(write, write.old)
            except (OSError, Unsupported) as error:
                failures.append(f"{write.label} ({error})")
        return f", except: {'; '.join(failures)}" if failures else ""

    # -- verify ---------------------------------------------------------------------

    def verify(self):
        state = self.state()
        if state is None:
            raise TuneError(Code.STATE, self.state_dir, "nothing applied in this boot: "
                            "run tusk-tune apply (at boot, tusk-tune boot does)")
        result = Result(profile=state.get("profile", ""))
        cache = {}
        for label, data in state["applied"].items():
            write = Write.from_dict(data)
            found = current_value(self.host, write, cache)
            result.checked += 1
            if not same(write.form, found, write.new):
                result.drift.append((label, write.show(write.new), write.show(found)))
        return result

    # -- rollback -------------------------------------------------------------------

    def rollback(self):
        with self.locked():
            state = self.state()
            if state is None:
                raise TuneError(Code.STATE, self.state_dir, "nothing applied in this boot: "
                                "nothing to roll back")
            result = Result(profile=state.get("profile", ""))
            failures = []
            for data in reversed(state["originals"]):
                write = Write.from_dict(data)
                if write.old is None:
                    continue
                refused = write_refused(write)
                if refused:
                    result.skipped.append((write.label, refused))
                    continue
                try:
                    self._set(write, write.old)
                except Unsupported as why:
                    result.skipped.append((write.label, str(why)))
                    continue
                except OSError as error:
                    failures.append(f"{write.label}: {error.strerror or error}")
                    continue
                result.written.append(write)
            if failures:
                self._save(state)
                raise TuneError(Code.WRITE, "", "could not restore: " + "; ".join(failures))
            os.unlink(self._path(STATE_FILE))
            self._set_boot_profile(NO_PROFILE)
        return result

    # -- boot -----------------------------------------------------------------------

    def boot(self):
        name = self.boot_profile()
        if name == NO_PROFILE:
            return Result(message="rolled back earlier: the boot leaves the NICs as they are")
        return self.apply(name)
