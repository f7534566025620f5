"""Tuning jobs forged by someone who controls the web process (issue 16): job rows written
straight into the database, profile files planted as the web user tusk. The real agent
refuses each with a clear message and runs nothing: no sysctl changes, no file content
shown. The sysctl the attacks aim at, kernel.printk_ratelimit, is host-wide and harmless;
it is put back after every test, whatever happened."""
import os
import subprocess

import pytest
from tuskweb import wait

from jobs import queue
from tuning.models import TuningReport

TARGET = "/proc/sys/kernel/printk_ratelimit"
SECRET = "tusk-secret-7f3a9c: only root may read this line"


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read().strip()


@pytest.fixture
def target():
    """The global sysctl an attack would change: its value now, restored afterwards."""
    before = read(TARGET)
    yield before
    with open(TARGET, "w", encoding="utf-8") as handle:
        handle.write(before)


@pytest.fixture
def planted(system_users, tmp_path):
    """A directory of the web user's own, as /tmp is to anyone on the box."""
    directory = f"/tmp/tusk-attack-{os.getpid()}"
    subprocess.run(["runuser", "-u", "tusk", "--", "mkdir", "-p", directory], check=True)
    yield directory
    subprocess.run(["rm", "-rf", directory], check=True)


def plant(directory, name, text):
    path = os.path.join(directory, name)
    subprocess.run(["runuser", "-u", "tusk", "--", "tee", path], input=text, text=True,
                   capture_output=True, check=True)
    return path


@pytest.mark.parametrize("kind", ["tuning.plan", "tuning.apply"])
def test_a_forged_job_naming_a_planted_profile_file_runs_nothing(agent, planted, target, kind):
    evil = plant(planted, "evil.conf", f"[sysctl]\n# more messages\n"
                                       f"kernel.printk_ratelimit = {int(target) + 7}\n")
    job = wait(queue.enqueue(kind, {"profile": evil}))
    assert read(TARGET) == target
    assert job.state == "failed"
    assert job.error == (f"profile: Select a valid choice. {evil} is not one of the available "
                         "choices."), job.error
    assert not TuningReport.objects.filter(kind="apply").exists()


def test_a_forged_job_with_an_option_for_a_profile_runs_nothing(agent, planted, target):
    """The profile is one argument of tusk-tune: it must not become an option."""
    plant(planted, "evil.conf", f"[sysctl]\n# more messages\n"
                                f"kernel.printk_ratelimit = {int(target) + 7}\n")
    job = wait(queue.enqueue("tuning.apply", {"profile": f"--profile-dir={planted}"}))
    assert job.state == "failed" and "not one of the available choices" in job.error, job.error
    assert read(TARGET) == target


@pytest.fixture
def secret():
    """A root-only file, as /etc/shadow is (a short path: it is shown in a report)."""
    path = f"/tmp/tusk-shadow-{os.getpid()}"
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
        handle.write(f"{SECRET}\nsecond line\n")
    yield path
    os.unlink(path)


def test_a_forged_job_naming_a_root_only_file_does_not_show_its_content(agent, secret):
    for kind in ("tuning.plan", "tuning.apply"):
        job = wait(queue.enqueue(kind, {"profile": secret}))
        assert job.state == "failed"
        assert "not one of the available choices" in job.error, job.error
        assert "tusk-secret" not in job.error
    for report in TuningReport.objects.all():
        assert "tusk-secret" not in report.error + str(report.result) + report.profile
