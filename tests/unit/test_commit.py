"""tusklib.commit, the commit-confirm mechanism the policy and the network share, with
real processes: a domain whose live state is a file (commit_domain_for_tests), its
detached watchdog started as `python -m tusklib.commit`, SIGKILL of the process that
applied, a watchdog killed as by a power cut."""
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from commit_domain_for_tests import DOMAIN, RESTORE_FAILS, FileCode, FileCommit, FileError
from kit import wait_until

from tusklib import commit

HERE = Path(__file__).resolve().parent
WEBUI = HERE.parents[1] / "webui"
SHORT = 2      # seconds: a confirm timeout that runs out within the test
LONG = 60      # seconds: one that does not


@pytest.fixture
def env(monkeypatch):
    """The environment every process of the test runs with - the watchdogs inherit it:
    the test domain registered, and importable."""
    monkeypatch.setenv(commit.TEST_DOMAINS_VARIABLE,
                       f"{DOMAIN}=commit_domain_for_tests:FileCommit")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(WEBUI), str(HERE)]))
    return dict(os.environ)


@pytest.fixture
def domain(env, tmp_path):
    """A FileCommit whose confirmed revision made "old" live."""
    state = tmp_path / "state"
    applied = FileCommit(str(state))
    applied.apply("old", LONG)
    applied.confirm(user="test")
    wait_until(lambda: not watchdogs(state), 5, "the first revision's watchdog to leave")
    yield applied
    for pid in watchdogs(state):
        os.kill(pid, signal.SIGKILL)


def watchdogs(state):
    result = subprocess.run(["pgrep", "-f", f"tusklib.commit {DOMAIN} {state} "],
                            capture_output=True, text=True)
    return [int(pid) for pid in result.stdout.split()]


def meta(domain, rev_id):
    return json.loads((Path(domain.store.revision_dir(rev_id)) / "meta.json").read_text())


def kill_watchdogs(state):
    """As a power cut would: the watchdog dies, pending.json stays."""
    pids = wait_until(lambda: watchdogs(state), 5, "the watchdog to start")
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not watchdogs(state), 5, "the killed watchdog gone")


def test_the_detached_watchdog_restores_an_unconfirmed_revision(domain):
    state = domain.store.state_dir
    revision = domain.apply("new", SHORT)
    assert domain.live() == "new"
    [pid] = wait_until(lambda: watchdogs(state), 5, "the watchdog to start")
    assert os.getsid(pid) == pid, "the watchdog leads a session of its own"
    wait_until(lambda: domain.live() == "old", SHORT + 5, "the watchdog to restore old")
    wait_until(lambda: meta(domain, revision.id)["outcome"] != "pending", 5, "the outcome")
    assert meta(domain, revision.id)["outcome"] == f"rolled back: not confirmed within {SHORT} s"
    assert domain.store.pending() is None and domain.store.confirmed_id() == revision.id - 1
    wait_until(lambda: not watchdogs(state), 5, "the watchdog to leave")


def test_sigkill_of_the_applying_process_does_not_stop_the_rollback(domain, env):
    code = ("import sys, time; from commit_domain_for_tests import FileCommit; "
            f"FileCommit(sys.argv[1]).apply('new', {SHORT}); print('applied', flush=True); "
            "time.sleep(600)")
    applier = subprocess.Popen([sys.executable, "-c", code, domain.store.state_dir], env=env,
                               stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert applier.stdout.readline() == "applied\n"
    assert domain.live() == "new"
    os.killpg(applier.pid, signal.SIGKILL)
    assert applier.wait() == -signal.SIGKILL
    wait_until(lambda: domain.live() == "old", SHORT + 5, "the rollback after SIGKILL")
    rev_id = domain.store.ids()[-1]
    wait_until(lambda: meta(domain, rev_id)["outcome"] != "pending", 5, "the outcome")
    assert meta(domain, rev_id)["outcome"].startswith("rolled back: not confirmed")


def test_a_confirm_before_the_deadline_keeps_the_change(domain):
    revision = domain.apply("new", SHORT)
    deadline = domain.store.pending()["deadline"]
    assert meta(domain, revision.id)["deadline"] == deadline
    confirmed = domain.confirm(user="alice")
    assert confirmed.meta["confirmed_by"] == "alice"
    wait_until(lambda: not watchdogs(domain.store.state_dir), 5, "the watchdog to leave")
    wait_until(lambda: time.time() > deadline + 1, SHORT + 5, "the deadline to pass")
    assert domain.live() == "new"
    assert domain.store.confirmed_id() == revision.id and domain.store.pending() is None
    assert meta(domain, revision.id)["outcome"] == commit.CONFIRMED
    with pytest.raises(FileError) as refused:
        domain.confirm()
    assert (refused.value.code, refused.value.message) == (FileCode.NOT_PENDING,
                                                           "nothing awaits confirmation")


def test_a_confirm_the_check_refuses_leaves_the_revision_pending(domain):
    """The network refuses a confirm that did not arrive over the new management address:
    its check reads what begin() kept in pending.json."""
    revision = domain.apply("new", LONG, address="192.0.2.7")
    seen = []

    def over_the_new_address(pending):
        seen.append(pending["address"])
        raise FileError(FileCode.REFUSED, "", "the confirm came over 198.51.100.1")

    with pytest.raises(FileError) as refused:
        domain.confirm(check=over_the_new_address)
    assert refused.value.code == FileCode.REFUSED and seen == ["192.0.2.7"]
    assert domain.store.pending()["revision"] == revision.id
    assert domain.store.confirmed_id() == revision.id - 1
    assert meta(domain, revision.id)["outcome"] == "pending"
    assert domain.live() == "new" and watchdogs(domain.store.state_dir)
    domain.confirm(check=lambda pending: None)
    assert domain.store.confirmed_id() == revision.id


def test_recover_rolls_back_an_overdue_revision_whose_watchdog_died(domain):
    domain.apply("new", SHORT)
    kill_watchdogs(domain.store.state_dir)
    deadline = domain.store.pending()["deadline"]
    wait_until(lambda: time.time() > deadline, SHORT + 5, "the deadline to pass")
    assert domain.live() == "new", "without its watchdog nothing rolls it back"
    assert domain.recover() == "rolled back"
    assert domain.live() == "old" and domain.store.pending() is None


def test_recover_rearms_a_watchdog_for_a_revision_not_yet_overdue(domain):
    timeout = 8    # the watchdog is killed and recover() runs well within it
    domain.apply("new", timeout)
    kill_watchdogs(domain.store.state_dir)
    assert domain.recover() == "watching"
    wait_until(lambda: watchdogs(domain.store.state_dir), 5, "a new watchdog")
    wait_until(lambda: domain.live() == "old", timeout + 5, "the re-armed watchdog's rollback")
    assert domain.recover() == "nothing pending"


def test_drop_pending_at_boot_forgets_an_unconfirmed_revision(domain):
    revision = domain.apply("new", LONG)
    kill_watchdogs(domain.store.state_dir)
    with domain.locked():
        dropped = domain.drop_pending("rolled back: restarted before it was confirmed")
    assert dropped["revision"] == revision.id
    assert domain.store.pending() is None
    assert domain.store.confirmed_id() == revision.id - 1, "boot makes the confirmed one live"
    assert meta(domain, revision.id)["outcome"] == "rolled back: restarted before it was confirmed"
    with domain.locked():
        assert domain.drop_pending("again") is None


def test_a_failed_restore_is_recorded_and_keeps_the_revision_pending(domain):
    revision = domain.apply("new", LONG)
    Path(domain.store.state_dir, RESTORE_FAILS).touch()
    with pytest.raises(FileError) as failed:
        domain.cancel(user="bob")
    assert failed.value.code == FileCode.RESTORE
    assert failed.value.message == ("restoring the previous file failed: "
                                    "the test made restoring fail")
    assert meta(domain, revision.id)["outcome"] == "rollback failed: the test made restoring fail"
    assert domain.store.pending()["revision"] == revision.id
    Path(domain.store.state_dir, RESTORE_FAILS).unlink()
    domain.cancel(user="bob")
    assert domain.live() == "old"
    assert meta(domain, revision.id)["outcome"] == "rolled back by bob"


def test_the_lock_held_elsewhere_refuses_in_the_domains_terms(domain):
    with open(Path(domain.store.state_dir, "lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with pytest.raises(FileError) as refused:
            with domain.locked(wait=0.2):
                pass
    assert refused.value.code == FileCode.LOCKED
    assert refused.value.message == ("another apply, confirm or rollback is running on this "
                                     "system; try again")


def test_a_missing_revision_is_the_domains_error(domain):
    with pytest.raises(FileError) as missing:
        domain.store.get(99)
    assert (missing.value.code, missing.value.message) == (FileCode.REVISION,
                                                           "there is no revision 99")


@pytest.mark.parametrize("name", ["os:system", "policy.core.applier:Applier", "nosuch"])
def test_the_watchdog_starts_only_a_registered_domain(domain, env, name):
    """The command line names a domain, never code: an import path is refused before
    anything is imported, and the pending revision is left alone."""
    revision = domain.apply("new", LONG)
    result = subprocess.run([sys.executable, "-m", "tusklib.commit", name,
                             domain.store.state_dir, str(revision.id)],
                            env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert f"unknown commit domain {name!r}; known: {DOMAIN}, ha, network, policy" in result.stderr
    assert domain.store.pending()["revision"] == revision.id and domain.live() == "new"


def test_a_test_domain_cannot_take_a_builtin_name(monkeypatch):
    monkeypatch.setenv(commit.TEST_DOMAINS_VARIABLE, "policy=commit_domain_for_tests:FileCommit")
    with pytest.raises(ValueError, match="with a name of its own"):
        commit.domain_class("policy")


def test_a_domain_must_name_its_own_class(monkeypatch):
    monkeypatch.setenv(commit.TEST_DOMAINS_VARIABLE, "other=commit_domain_for_tests:FileCommit")
    with pytest.raises(ValueError, match="is not the CommitConfirm of domain 'other'"):
        commit.domain_class("other")
