"""The A/B system slots of an installed box (docs/UPGRADES.md): which slot booted, what
GRUB's environment says of each, the database's hand-over between releases, and the
health check that marks a new slot good - or bad, and boots the old one again.

RAUC (/etc/rauc/system.conf, bootloader=grub) installs bundles into the slot that did
not boot and reads and writes the same GRUB environment; this module adds what RAUC
leaves to the system: X_TRIAL (a slot RAUC installed, until its first health check
passes), the check itself, and the database copy a fallback needs.
"""
import json
import os
import shutil
import ssl
import subprocess
import time
import urllib.request

from tusklib.files import write_atomically
from tusklib.names import FAMILY, TABLE

SLOTS = ("A", "B")
ESP_MOUNT = "/efi"
ESP_LABEL = "TUSK_ESP"
GRUBENV = f"{ESP_MOUNT}/grub/grubenv"
VERSION_FILE = "/usr/lib/tusk/version"
DATA = "/data"
PGDATA = f"{DATA}/pgsql"
SNAPSHOT = f"{DATA}/pgsql.before-upgrade"
ABANDONED = f"{DATA}/pgsql.abandoned"
SYSTEM_STATE = f"{DATA}/tusk/system"
DB_RELEASE = f"{SYSTEM_STATE}/db-release"
SNAPSHOT_META = f"{SYSTEM_STATE}/db-snapshot.json"
HEALTH = f"{SYSTEM_STATE}/health.json"
EVENTS = f"{SYSTEM_STATE}/events.jsonl"
# How long the health check waits for every check to pass (a slow box's first boot
# migrates the database; under TCG in the tests it is minutes).
HEALTH_SECONDS = 600


def log(message):
    print(f"tusk-slots: {message}", flush=True)


def run(argv, check=True, **kwargs):
    kwargs.setdefault("capture_output", True)
    return subprocess.run([str(a) for a in argv], check=check, text=True, **kwargs)


def booted_slot(cmdline="/proc/cmdline"):
    """A or B (rauc.slot= on the kernel's command line, which GRUB's menu sets), or
    None: the live system, or a system that did not boot from a slot."""
    with open(cmdline, encoding="utf-8") as handle:
        for word in handle.read().split():
            if word.startswith("rauc.slot=") and word[len("rauc.slot="):] in SLOTS:
                return word[len("rauc.slot="):]
    return None


def other(slot):
    return SLOTS[1 - SLOTS.index(slot)]


def read_text(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except FileNotFoundError:
        return None


def release():
    return read_text(VERSION_FILE) or "unknown"


def grubenv(path=GRUBENV):
    """GRUB's environment as a dict ({} when there is none)."""
    if not os.path.exists(path):
        return {}
    listed = run(["grub-editenv", path, "list"]).stdout
    return dict(line.split("=", 1) for line in listed.splitlines() if "=" in line)


def grubenv_set(*pairs, path=GRUBENV):
    run(["grub-editenv", path, "set", *pairs])


def event(kind, message, **details):
    """One line of what happened to the slots, for the System page."""
    os.makedirs(SYSTEM_STATE, exist_ok=True)
    with open(EVENTS, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"time": time.time(), "kind": kind, "message": message,
                                 **details}) + "\n")
    log(message)


# -- the database across releases -----------------------------------------------------

def hand_over_database():
    """Before PostgreSQL starts (tusk-db.service, as root): the release that last ran
    the database is recorded in DB_RELEASE. When another release boots, it either takes
    the database over - after a copy of the stopped cluster (SNAPSHOT) - and migrates it
    forward, or, when that copy was taken from this very release for the one that ran
    since (a fallback, or the old slot booted on purpose), the copy comes back and the
    newer release's cluster is kept aside in ABANDONED. A release thus always finds a
    database whose schema it wrote."""
    this = release()
    last = read_text(DB_RELEASE)
    if not os.path.exists(f"{PGDATA}/PG_VERSION") or last is None or last == this:
        if last != this:
            write_atomically(DB_RELEASE, this + "\n", 0o644)
        return "unchanged"
    meta = json.loads(read_text(SNAPSHOT_META) or "{}")
    if meta.get("from") == this and meta.get("for") == last and os.path.isdir(SNAPSHOT):
        shutil.rmtree(ABANDONED, ignore_errors=True)
        os.rename(PGDATA, ABANDONED)
        os.rename(SNAPSHOT, PGDATA)
        os.unlink(SNAPSHOT_META)
        write_atomically(DB_RELEASE, this + "\n", 0o644)
        event("database-restored",
              f"release {this} got back its database from before the upgrade to {last}; "
              f"what changed under {last} is kept in {ABANDONED}",
              release=this, newer=last)
        return "restored"
    partial = f"{SNAPSHOT}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    run(["cp", "-a", PGDATA, partial])
    run(["sync", "-f", partial])
    shutil.rmtree(SNAPSHOT, ignore_errors=True)
    os.rename(partial, SNAPSHOT)
    write_atomically(SNAPSHOT_META, json.dumps({"from": last, "for": this,
                                                "time": time.time()}) + "\n", 0o644)
    # recorded before any migration runs: a fallback must restore even after a
    # migration that failed half-way
    write_atomically(DB_RELEASE, this + "\n", 0o644)
    event("database-kept", f"release {this} takes the database over from {last}; the "
          f"cluster as {last} left it is kept in {SNAPSHOT}", release=this, older=last)
    return "kept"


# -- the health check --------------------------------------------------------------------

class Final(str):
    """A failure that waiting will not cure (a unit failed, or restarts in a loop): the
    check gives up at once instead of at its deadline."""


RESTART_LOOP = 3

def psql(sql):
    return run(["runuser", "-u", "postgres", "--", "psql", "-h", "/run/postgresql", "-X",
                "-tAc", sql, "tusk"], check=False)


def check_database(manage):
    """manage: boot.manage, which raises when manage.py exits non-zero."""
    try:
        manage("migrate", "--check")
    except subprocess.CalledProcessError as error:
        said = ((error.stdout or "") + (error.stderr or "")).strip()[-300:]
        return f"the database is not migrated (manage.py migrate --check: " \
               f"{said or error.returncode})"
    return None


def check_agent(boot_seconds):
    shown = run(["systemctl", "show", "tusk-agent", "-p", "ActiveState", "-p", "NRestarts"],
                check=False).stdout
    state = dict(line.split("=", 1) for line in shown.splitlines() if "=" in line)
    active = state.get("ActiveState", "unknown")
    restarts = int(state["NRestarts"]) if state.get("NRestarts", "").isdigit() else 0
    if active == "failed" or restarts >= RESTART_LOOP:
        return Final(f"tusk-agent fails: {active}, restarted {restarts} times since "
                     "this boot")
    if active != "active":
        return f"tusk-agent is not running ({active})"
    if restarts:
        return f"tusk-agent restarted {restarts} times since this boot"
    beat = psql("SELECT count(*) FROM jobs_agentheartbeat WHERE started_at > "
                f"now() - interval '{int(boot_seconds)} seconds' AND "
                "seen_at > now() - interval '5 minutes'")
    if beat.returncode != 0 or beat.stdout.strip() in ("", "0"):
        return "the agent has not reported its heartbeat since this boot"
    return None


def check_firewall():
    state = run(["systemctl", "is-active", "tusk-firewall"], check=False).stdout.strip()
    if state == "failed":
        return Final("tusk-firewall failed: the kernel refused the confirmed policy or the "
                     "host table (journalctl -u tusk-firewall)")
    if state != "active":
        return f"tusk-firewall did not load the confirmed policy ({state})"
    if run(["nft", "list", "table", FAMILY, TABLE], check=False).returncode != 0:
        return f"table {FAMILY} {TABLE} is not loaded"
    return None


def check_dashboard():
    """What a client sees: /healthz/ on nginx's loopback listener (the web process and
    its database), and the login page over HTTPS."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:8080/healthz/", timeout=30) as reply:
            if reply.status != 200:
                return f"/healthz/ answered {reply.status}"
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE     # the box's own self-signed certificate
        with urllib.request.urlopen("https://127.0.0.1/accounts/login/", timeout=30,
                                    context=context) as reply:
            if reply.status != 200 or b"<form" not in reply.read():
                return f"the login page answered {reply.status} without its form"
    except (OSError, ValueError) as error:
        return f"the dashboard does not answer: {error}"
    return None


def health_failures(boot_seconds):
    """The quick checks' failures (the database's is apart: see health())."""
    checks = (check_firewall, lambda: check_agent(boot_seconds), check_dashboard)
    return [problem for problem in (check() for check in checks) if problem]


def uptime():
    with open("/proc/uptime", encoding="utf-8") as handle:
        return float(handle.read().split()[0])


def health(manage, seconds=HEALTH_SECONDS, reboot=True):
    """tusk-health.service, late in the boot of a slot: waits up to `seconds` for every
    check to pass. Passed: RAUC marks the slot good and its trial ends; if the other
    slot was on trial, this boot is the fallback from it, which is marked bad. Failed
    on trial: the slot is marked bad and the box reboots into the other. Failed on a
    good slot: only recorded (an older release is no cure). Returns the exit status."""
    slot = booted_slot()
    if slot is None:
        log("not booted from a system slot (the live system): nothing to mark")
        return 0
    env = grubenv()
    trial = env.get(f"{slot}_TRIAL") == "1"
    deadline = time.monotonic() + seconds
    # The database's check starts Django (tens of seconds on a slow CPU, beside the web
    # workers starting): it runs once the quick checks pass, or in the last round for
    # the record, and once passed it is not run again - after tusk-setup nothing
    # migrates.
    database_passed = False
    while True:
        failures = health_failures(uptime() + 5)
        last_round = time.monotonic() > deadline
        if not database_passed and (not failures or last_round):
            problem = check_database(manage)
            database_passed = problem is None
            failures += [problem] if problem else []
        if not failures or last_round or \
                any(isinstance(problem, Final) for problem in failures):
            break
        time.sleep(5)

    def record(failures):
        write_atomically(HEALTH, json.dumps({
            "time": time.time(), "slot": slot, "release": release(), "trial": trial,
            "passed": not failures, "failures": failures}) + "\n", 0o644)

    try:
        return _conclude(slot, env, trial, [str(problem) for problem in failures], reboot,
                         record)
    finally:
        write_status()


def _rauc_mark(*argv):
    """rauc status <argv> -> None, or what RAUC said when it failed."""
    result = run(["rauc", "status", *argv], check=False)
    if result.returncode != 0:
        return f"rauc status {' '.join(argv)} failed: " \
               f"{(result.stderr or result.stdout).strip()[-300:] or result.returncode}"
    return None


def _conclude(slot, env, trial, failures, reboot, record):
    """What the check's outcome means for the slots; record(failures) writes
    health.json before anything reboots."""
    if not failures:
        # a release whose RAUC cannot mark it good could never be upgraded again
        problem = _rauc_mark("mark-good", "booted")
        if problem:
            failures = [problem]
    record(failures)
    if not failures:
        grubenv_set(f"{slot}_TRIAL=0")
        if trial:
            event("upgrade-good", f"release {release()} in slot {slot} passed its health "
                  "check and is marked good", slot=slot, release=release())
        if env.get(f"{other(slot)}_TRIAL") == "1":
            for problem in (_rauc_mark("mark-bad", "other"),
                            _rauc_mark("mark-active", "booted")):
                if problem:
                    log(problem)
            grubenv_set(f"{other(slot)}_TRIAL=0")
            event("fell-back", f"slot {other(slot)} never passed its health check; the box "
                  f"returned to slot {slot} (release {release()}) by itself",
                  slot=slot, failed=other(slot))
        return 0
    for problem in failures:
        log(f"health check failed: {problem}")
    if trial and reboot:
        event("upgrade-bad", f"release {release()} in slot {slot} failed its health check "
              f"({'; '.join(failures)}); booting slot {other(slot)} again",
              slot=slot, release=release(), failures=failures)
        # even if RAUC cannot mark it bad, GRUB gives a slot on trial one boot only
        problem = _rauc_mark("mark-bad", "booted")
        if problem:
            log(problem)
        run(["systemctl", "reboot"], check=False)
    return 1


# -- the console's view (tusk-boot slots) ------------------------------------------------

def describe(env, booted, versions):
    """Lines on both slots for the console: booted, next, release, OK/trial state."""
    order = env.get("ORDER", "A B").split()
    lines = []
    for slot in SLOTS:
        state = []
        if slot == booted:
            state.append("running")
        if env.get("ONCE") == slot:
            state.append("boots next, once")
        elif order and order[0] == slot:
            state.append("first in the boot order")
        if env.get(f"{slot}_OK") != "1":
            state.append("not bootable (empty, or marked bad)")
        elif env.get(f"{slot}_TRIAL") == "1":
            state.append("on trial: its health check has not passed yet")
        else:
            state.append("good")
        lines.append(f"slot {slot}: release {versions.get(slot) or 'unknown'} - "
                     f"{', '.join(state)}")
    return lines


def rauc_versions():
    """{slot: the release RAUC installed there}, from rauc status (what it knows)."""
    result = run(["rauc", "status", "--detailed", "--output-format=json"], check=False)
    if result.returncode != 0:
        return {}
    versions = {}
    for entry in json.loads(result.stdout).get("slots", []):
        for slot in entry.values():
            bundle = (slot.get("slot_status") or {}).get("bundle") or {}
            if slot.get("bootname") in SLOTS and bundle.get("version"):
                versions[slot["bootname"]] = bundle["version"]
    return versions


def status():
    """Both slots as the System page shows them (slots.json)."""
    booted = booted_slot()
    if booted is None:
        return {"booted": None, "next": None, "slots": {}, "lines": []}
    env = grubenv()
    versions = {**rauc_versions(), booted: release()}
    order = [slot for slot in env.get("ORDER", "A B").split() if slot in SLOTS]
    bootable = [slot for slot in [env.get("ONCE"), *order] if env.get(f"{slot}_OK") == "1"]
    return {"booted": booted, "next": bootable[0] if bootable else None,
            "slots": {slot: {"release": versions.get(slot), "running": slot == booted,
                             "ok": env.get(f"{slot}_OK") == "1",
                             "trial": env.get(f"{slot}_TRIAL") == "1"} for slot in SLOTS},
            "lines": describe(env, booted, versions)}


def write_status(state_dir=SYSTEM_STATE):
    """status() into state_dir/slots.json (world-readable: the web process shows it)."""
    data = status()
    os.makedirs(state_dir, exist_ok=True)
    write_atomically(os.path.join(state_dir, "slots.json"), json.dumps(data) + "\n", 0o644)
    return data


def cmd_slots(once=False):
    """tusk-boot slots [--once]: both slots; --once: the other one boots next, once."""
    booted = booted_slot()
    if booted is None:
        print("This system did not boot from a system slot: it is the live system, or a box "
              "installed before A/B upgrades, which must be reinstalled once (back up, "
              "reinstall, restore: docs/UPGRADES.md).")
        return 1
    env = grubenv()
    versions = {**rauc_versions(), booted: release()}
    for line in describe(env, booted, versions):
        print(line)
    if not once:
        return 0
    target = other(booted)
    if env.get(f"{target}_OK") != "1":
        print(f"Slot {target} cannot boot: it is empty or marked bad.")
        return 1
    grubenv_set(f"ONCE={target}", f"{target}_TRY=0")
    print(f"Slot {target} boots next, once; the boot after it takes the order again.")
    return 0
