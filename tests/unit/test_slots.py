"""The database's hand-over between the releases of the two system slots
(appliance/slots.py, tusk-boot db), on real directories with cp -a as the box runs it,
and GRUB's environment through the real grub-editenv. The VM test (test_upgrade.py)
runs the same code on an installed box with PostgreSQL and RAUC."""
import json

import pytest

from appliance import slots


@pytest.fixture
def box(tmp_path, monkeypatch):
    """A /data with a database cluster, and the release this slot runs, as files."""
    data = tmp_path / "data"
    state = data / "tusk" / "system"
    state.mkdir(parents=True)
    version = tmp_path / "version"
    paths = {"PGDATA": data / "pgsql", "SNAPSHOT": data / "pgsql.before-upgrade",
             "ABANDONED": data / "pgsql.abandoned", "SYSTEM_STATE": state,
             "DB_RELEASE": state / "db-release", "SNAPSHOT_META": state / "db-snapshot.json",
             "EVENTS": state / "events.jsonl", "VERSION_FILE": version}
    for name, path in paths.items():
        monkeypatch.setattr(slots, name, str(path))
    cluster = data / "pgsql"
    cluster.mkdir(mode=0o700)
    (cluster / "PG_VERSION").write_text("17\n")

    class Box:
        def boot(self, release):
            version.write_text(release + "\n")
            return slots.hand_over_database()

        def write(self, text):
            (cluster / "rows").write_text(text)

        def rows(self, where=cluster):
            return (where / "rows").read_text()

        def db_release(self):
            return paths["DB_RELEASE"].read_text().strip()

        def events(self):
            return [json.loads(line)["kind"] for line in
                    paths["EVENTS"].read_text().splitlines()]

    return Box(), paths


def test_the_first_boot_records_the_release_and_touches_nothing(box):
    b, paths = box
    b.write("v1 rows")
    assert b.boot("1.0") == "unchanged"
    assert b.db_release() == "1.0"
    assert b.boot("1.0") == "unchanged"
    assert not paths["SNAPSHOT"].exists() and not paths["EVENTS"].exists()


def test_an_upgrade_keeps_a_copy_and_a_fallback_restores_it(box):
    b, paths = box
    b.write("v1 rows")
    b.boot("1.0")
    assert b.boot("2.0") == "kept"
    assert b.rows(paths["SNAPSHOT"]) == "v1 rows"
    assert b.db_release() == "2.0"      # before any migration of 2.0 has run
    assert json.loads(paths["SNAPSHOT_META"].read_text())["from"] == "1.0"
    b.write("v2 rows (migrated)")
    # 2.0 fails its health check: slot A (1.0) boots again
    assert b.boot("1.0") == "restored"
    assert b.rows() == "v1 rows"
    assert b.rows(paths["ABANDONED"]) == "v2 rows (migrated)"
    assert b.db_release() == "1.0"
    assert not paths["SNAPSHOT"].exists() and not paths["SNAPSHOT_META"].exists()
    assert b.events() == ["database-kept", "database-restored"]


def test_a_second_try_of_the_upgrade_starts_from_what_the_old_release_changed(box):
    """After a fallback the operator goes on under 1.0; 2.0 installed again must take
    over those changes, not the abandoned cluster of its first try."""
    b, paths = box
    b.write("v1 rows")
    b.boot("1.0")
    b.boot("2.0")
    b.write("v2 rows")
    b.boot("1.0")
    b.write("v1 rows, changed after the fallback")
    assert b.boot("2.0") == "kept"
    assert b.rows() == "v1 rows, changed after the fallback"
    assert b.rows(paths["SNAPSHOT"]) == "v1 rows, changed after the fallback"


def test_a_copy_left_half_done_by_a_power_cut_is_made_again(box):
    b, paths = box
    b.write("v1 rows")
    b.boot("1.0")
    partial = paths["SNAPSHOT"].with_name("pgsql.before-upgrade.partial")
    partial.mkdir()
    (partial / "rows").write_text("torn")
    assert b.boot("2.0") == "kept"
    assert b.rows(paths["SNAPSHOT"]) == "v1 rows"
    assert not partial.exists()


def test_a_copy_from_another_release_is_not_restored(box):
    """1.0 -> 2.0 -> 3.0: booting 1.0 now finds a copy taken for 3.0 from 2.0 - not
    its own - so it does not restore a database it never wrote."""
    b, paths = box
    b.write("v1")
    b.boot("1.0")
    b.boot("2.0")
    b.write("v2")
    b.boot("3.0")
    b.write("v3")
    assert b.boot("2.0") == "restored"
    assert b.rows() == "v2"
    assert b.boot("1.0") == "kept"
    assert b.rows() == "v2"


def test_the_booted_slot_is_read_from_the_kernel_command_line(tmp_path):
    cmdline = tmp_path / "cmdline"
    cmdline.write_text("root=PARTUUID=x rauc.slot=B panic=10 rw\n")
    assert slots.booted_slot(str(cmdline)) == "B"
    cmdline.write_text("root=PARTUUID=x rauc.slot=C\n")
    assert slots.booted_slot(str(cmdline)) is None
    cmdline.write_text("console=ttyS0\n")
    assert slots.booted_slot(str(cmdline)) is None


def test_grubenv_reads_back_what_was_set(tmp_path):
    env = tmp_path / "grubenv"
    slots.run(["grub-editenv", env, "create"])
    slots.grubenv_set("ORDER=B A", "B_TRIAL=1", path=str(env))
    assert slots.grubenv(str(env)) == {"ORDER": "B A", "B_TRIAL": "1"}
    assert slots.grubenv(str(tmp_path / "none")) == {}


def test_the_console_names_each_slots_state():
    env = {"ORDER": "B A", "A_OK": "1", "A_TRIAL": "0", "B_OK": "1", "B_TRIAL": "1"}
    assert slots.describe(env, "A", {"A": "1.0", "B": "2.0"}) == [
        "slot A: release 1.0 - running, good",
        "slot B: release 2.0 - first in the boot order, on trial: its health check has not "
        "passed yet"]
    env = {"ORDER": "A B", "A_OK": "1", "B_OK": "0", "ONCE": "B"}
    assert slots.describe(env, "A", {"A": "1.0"}) == [
        "slot A: release 1.0 - running, first in the boot order, good",
        "slot B: release unknown - boots next, once, not bootable (empty, or marked bad)"]


def test_the_agent_writes_the_pages_view_again_when_grubs_environment_changes(
        tmp_path, monkeypatch):
    """system.slots (the agent's periodic task): after an install from the console's shell
    the System page shows the slot that boots next, and no write while nothing changed."""
    from types import SimpleNamespace

    from system import agent_jobs

    env, state, version = tmp_path / "grubenv", tmp_path / "system", tmp_path / "version"
    version.write_text("1.0\n")
    slots.run(["grub-editenv", env, "create"])
    slots.grubenv_set("ORDER=A B", "A_OK=1", "B_OK=0", path=str(env))
    read = slots.grubenv
    monkeypatch.setattr(slots, "GRUBENV", str(env))
    monkeypatch.setattr(slots, "grubenv", lambda path=None: read(str(env)))
    monkeypatch.setattr(slots, "booted_slot", lambda cmdline=None: "A")
    monkeypatch.setattr(slots, "VERSION_FILE", str(version))
    agent = SimpleNamespace(config=SimpleNamespace(system_state_dir=str(state)))
    written = state / "slots.json"

    agent_jobs.refresh_slots(agent)
    assert json.loads(written.read_text())["next"] == "A"
    written.unlink()
    agent_jobs.refresh_slots(agent)             # unchanged: not written again
    assert not written.exists()
    slots.grubenv_set("ORDER=B A", "B_OK=1", "B_TRIAL=1", path=str(env))   # rauc install
    agent_jobs.refresh_slots(agent)
    view = json.loads(written.read_text())
    assert view["next"] == "B" and view["slots"]["B"]["trial"], view


def test_the_health_check_starts_django_once_and_only_when_the_rest_answers(monkeypatch):
    """manage.py migrate --check costs a Django start (tens of seconds under TCG): the
    check waits for the quick checks first, and does not run it again once passed."""
    quick = [["the dashboard does not answer"], ["the agent has not reported"], [], []]
    calls = []
    monkeypatch.setattr(slots, "booted_slot", lambda: "A")
    monkeypatch.setattr(slots, "grubenv", lambda: {"A_TRIAL": "0"})
    monkeypatch.setattr(slots, "health_failures", lambda _seconds: list(quick.pop(0)))
    monkeypatch.setattr(slots, "check_database", lambda manage: calls.append(manage))
    monkeypatch.setattr(slots, "time", type("T", (), {
        "monotonic": staticmethod(lambda: 0.0), "sleep": staticmethod(lambda _s: None),
        "time": staticmethod(lambda: 0.0)}))
    concluded = []
    monkeypatch.setattr(slots, "_conclude", lambda slot, env, trial, failures, reboot,
                        record: concluded.append(failures) or 0)
    monkeypatch.setattr(slots, "write_status", lambda: None)
    assert slots.health("manage", seconds=60) == 0
    assert calls == ["manage"] and concluded == [[]] and len(quick) == 1


def test_the_health_check_records_every_failure_at_its_deadline(monkeypatch):
    clock = iter([0.0, 10.0, 70.0])
    monkeypatch.setattr(slots, "booted_slot", lambda: "B")
    monkeypatch.setattr(slots, "grubenv", lambda: {"B_TRIAL": "1"})
    monkeypatch.setattr(slots, "health_failures", lambda _s: ["the dashboard does not answer"])
    monkeypatch.setattr(slots, "check_database", lambda _m: "the database is not migrated")
    monkeypatch.setattr(slots, "time", type("T", (), {
        "monotonic": staticmethod(lambda: next(clock)), "sleep": staticmethod(lambda _s: None),
        "time": staticmethod(lambda: 0.0)}))
    concluded = []
    monkeypatch.setattr(slots, "_conclude", lambda slot, env, trial, failures, reboot,
                        record: concluded.append((trial, failures)) or 1)
    monkeypatch.setattr(slots, "write_status", lambda: None)
    assert slots.health("manage", seconds=60) == 1
    assert concluded == [(True, ["the dashboard does not answer",
                                 "the database is not migrated"])]
