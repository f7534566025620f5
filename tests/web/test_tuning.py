"""The Tuning page and its jobs: the real agent runs tusk-tune in the test's network
namespace, where it sees the veth pair and that namespace's own rp_filter sysctls
(the host's are never written); the NIC table is checked on a fake machine's plan."""
import json
import os
import subprocess
import sys

from django.utils import timezone
from tuskweb import wait

from accounts.models import AuditEntry
from jobs import queue
from jobs.models import Job
from lab.paths import ROOT
from tuning.core import profile as profiles
from tuning.models import TuningReport

# what the forwarder profile sets in the namespace (0: no second routing lookup)
RP_FILTER = ("net.ipv4.conf.all.rp_filter", "net.ipv4.conf.default.rp_filter")


def sysctl(netns, name, value=None):
    argv = ["sysctl", "-n", name] if value is None else ["sysctl", "-qw", f"{name}={value}"]
    return subprocess.run(["ip", "netns", "exec", netns, *argv], capture_output=True, text=True,
                          check=True).stdout.strip()


def press(client, button, **fields):
    """Posts as the page's button does; returns its job once the agent has run it."""
    response = client.post(f"/tuning/{button}/", fields)
    job = Job.objects.filter(kind=f"tuning.{button}").first()
    assert response["Location"] == f"/jobs/{job.pk}/?next=tuning"
    return wait(job)


def page(client):
    return client.get("/tuning/").content.decode()


def test_plan_apply_verify_and_roll_back_in_the_namespace(agent, netns, admin_client):
    for name in RP_FILTER:
        sysctl(netns, name, 1)

    job = press(admin_client, "verify")  # nothing applied yet: a clean failure, shown
    assert job.state == "failed" and "nothing applied in this boot" in job.error
    assert "error[STATE]" in page(admin_client)

    job = press(admin_client, "plan", profile="forwarder")
    assert job.state == "succeeded", job.error
    assert job.result == {"profile": "forwarder", "writes": 2, "warnings": 0}
    shown = page(admin_client)
    assert '<tr data-label="/proc/sys/net/ipv4/conf/all/rp_filter"><td><code>/proc/sys/net/' \
        'ipv4/conf/all/rp_filter</code></td><td>1 → 0</td>' in shown
    assert 'data-label="/proc/sys/net/ipv4/conf/default/rp_filter"' in shown
    assert "not tuned unless a profile names them: eth1, eth2" in shown
    assert '<option value="forwarder" selected>' in shown
    assert [sysctl(netns, name) for name in RP_FILTER] == ["1", "1"]  # a plan writes nothing

    job = press(admin_client, "apply", profile="forwarder")
    assert job.state == "succeeded", job.error
    assert job.result == {"profile": "forwarder", "written": 2, "skipped": 0, "left": 0}
    assert [sysctl(netns, name) for name in RP_FILTER] == ["0", "0"]
    shown = page(admin_client)
    assert "Nothing to write: every value is as the profile wants it." in shown
    assert "2 values set." in shown and "1 → 0" in shown.split('id="apply-result"')[1]

    job = press(admin_client, "verify")
    assert job.state == "succeeded", job.error
    shown = page(admin_client)
    assert 'id="no-drift">No drift: the 2 values apply set (profile forwarder)' in shown
    assert "verify again" not in shown

    job = press(admin_client, "rollback")
    assert job.state == "succeeded", job.error
    assert job.result == {"profile": "forwarder", "restored": 2, "skipped": 0, "left": 2}
    assert [sysctl(netns, name) for name in RP_FILTER] == ["1", "1"]
    shown = page(admin_client)
    assert "0 → 1" in shown.split('id="rollback-result"')[1]
    assert "before the last apply or rollback: verify again" in shown
    assert 'data-label="/proc/sys/net/ipv4/conf/all/rp_filter"' in shown.split('id="writes"')[1]
    assert set(TuningReport.objects.values_list("kind", flat=True)) == {
        "plan", "apply", "verify", "rollback"}


def test_verify_reports_a_value_changed_behind_its_back(agent, netns, admin_client):
    for name in RP_FILTER:
        sysctl(netns, name, 1)
    assert press(admin_client, "apply", profile="forwarder").state == "succeeded"
    sysctl(netns, "net.ipv4.conf.all.rp_filter", 1)
    job = press(admin_client, "verify")
    assert job.state == "succeeded", job.error  # drift is a finding, not a failure
    assert job.result["drift"] == 1
    shown = page(admin_client)
    assert "1 of the 2 values apply set (profile forwarder) changed since" in shown
    assert "<td><code>/proc/sys/net/ipv4/conf/all/rp_filter</code></td><td>0</td><td>1</td>" \
        in shown
    press(admin_client, "rollback")


def test_a_plan_reads_the_live_policy_for_its_mtu_check(agent, admin_client):
    policy = ("zones:\n  - {name: inside, interfaces: [eth1]}\n"
              "  - {name: outside, interfaces: [eth2]}\n"
              "classes:\n  - {name: web, from: inside, to: outside, action: accept}\n")
    assert wait(queue.enqueue("policy.apply", {"policy_text": policy})).state == "succeeded"
    job = press(admin_client, "plan", profile="forwarder")
    assert job.state == "succeeded", job.error


def test_the_page_without_a_report_says_so_and_a_get_queues_nothing(admin_client):
    response = admin_client.get("/tuning/")
    assert response.status_code == 200
    shown = response.content.decode()
    assert 'id="no-report"' in shown and 'id="plan"' in shown
    assert f'<option value="{profiles.DEFAULT_PROFILE}" selected>' in shown
    assert not Job.objects.exists()


def test_a_viewer_sees_the_page_but_no_buttons(viewer_client):
    shown = viewer_client.get("/tuning/").content.decode()
    assert "An admin can plan a profile." in shown
    assert 'id="tuning-form"' not in shown and 'id="apply"' not in shown


def test_an_unknown_profile_is_named_and_nothing_is_queued(admin_client):
    for button in ("plan", "apply"):
        response = admin_client.post(f"/tuning/{button}/", {"profile": "nosuch"})
        assert response.status_code == 400
        assert "Select a valid choice. nosuch is not one of the available choices." in \
            response.context["form"].errors["profile"]
    assert not Job.objects.exists() and not AuditEntry.objects.exists()


def test_a_broken_operator_profile_is_refused_with_its_error(admin_client, tmp_path,
                                                             monkeypatch):
    (tmp_path / "mine.conf").write_text("[main]\nsummary = mine\n[rings]\nrx = lots\n")
    monkeypatch.setattr(profiles, "OPERATOR_DIR", str(tmp_path))
    assert "mine: cannot be loaded" in admin_client.get("/tuning/").content.decode()
    response = admin_client.post("/tuning/apply/", {"profile": "mine"})
    assert response.status_code == 400
    assert "[rings] rx" in str(response.context["form"].errors["profile"])
    assert not Job.objects.exists()


def test_an_operator_profile_setting_a_kernel_sysctl_is_refused(admin_client, tmp_path,
                                                                monkeypatch):
    """The same allow-list as tusk-tune's own (the web process loads profiles with its
    parser): what a profile may not set is named before any job is queued."""
    (tmp_path / "mine.conf").write_text("[sysctl]\n# more messages\n"
                                        "kernel.printk_ratelimit = 12\n")
    monkeypatch.setattr(profiles, "OPERATOR_DIR", str(tmp_path))
    response = admin_client.post("/tuning/apply/", {"profile": "mine"})
    assert response.status_code == 400
    assert (f"{tmp_path / 'mine.conf'} [sysctl] kernel.printk_ratelimit: not a sysctl a "
            "profile may set (allowed: net.core., net.ipv4., net.ipv6., net.netfilter.)") in \
        str(response.context["form"].errors["profile"])
    assert not Job.objects.exists()


def test_the_buttons_post_with_htmx_and_are_sent_to_the_job(admin_client):
    response = admin_client.post("/tuning/apply/", {"profile": "latency"},
                                 HTTP_HX_REQUEST="true")
    job = Job.objects.get(kind="tuning.apply")
    assert response.status_code == 204
    assert json.loads(response["HX-Location"]) == {"path": f"/jobs/{job.pk}/?next=tuning",
                                                   "target": "main"}
    assert job.args == {"profile": "latency"} and job.created_by.username == "alice"
    assert AuditEntry.objects.filter(action="tuning apply", target="latency",
                                     detail__job=job.pk).exists()
    response = admin_client.post("/tuning/plan/", {"profile": "nosuch"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200  # htmx swaps only a 2xx answer: the form's errors
    assert b"<html" not in response.content and b"not one of the available" in response.content


def test_the_job_page_leads_back_to_the_tuning_page(admin_client):
    admin_client.post("/tuning/verify/")
    job = Job.objects.get(kind="tuning.verify")
    Job.objects.filter(pk=job.pk).update(state="succeeded")
    response = admin_client.get(f"/jobs/{job.pk}/?next=tuning", HTTP_HX_REQUEST="true")
    assert response["HX-Redirect"] == "/tuning/"


def test_a_job_done_before_its_page_loads_goes_on_at_once(admin_client):
    admin_client.post("/tuning/verify/")
    job = Job.objects.get(kind="tuning.verify")
    assert admin_client.get(f"/jobs/{job.pk}/?next=tuning").status_code == 200  # queued
    Job.objects.filter(pk=job.pk).update(state="failed")
    assert admin_client.get(f"/jobs/{job.pk}/?next=tuning").status_code == 200  # read why
    Job.objects.filter(pk=job.pk).update(state="succeeded")
    response = admin_client.get(f"/jobs/{job.pk}/?next=tuning")
    assert response.status_code == 302 and response["Location"] == "/tuning/"
    assert admin_client.get(f"/jobs/{job.pk}/").status_code == 200  # no next: the page


def test_a_running_job_is_shown_and_the_page_follows_it(admin_client):
    admin_client.post("/tuning/rollback/")
    job = Job.objects.get(kind="tuning.rollback")
    shown = page(admin_client)
    assert f'job {job.pk} (tuning.rollback)' in shown and 'hx-trigger="every 1s"' in shown


def test_the_hardware_of_a_machine_with_real_nics(admin_client, tmp_path):
    tree = str(tmp_path / "tree")
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'tests' / 'tuning'}:{ROOT / 'webui'}")
    subprocess.run([sys.executable, "-c", "import fakehw; fakehw.build(fakehw.MACHINES["
                    f"'8-queue-smt'], {tree!r})"], env=env, check=True)
    planned = subprocess.run(
        [sys.executable, str(ROOT / "webui" / "bin" / "tusk-tune"), "--root", tree,
         "--no-policy", "--state-dir", str(tmp_path / "state"), "--json", "plan", "throughput"],
        capture_output=True, text=True, check=True).stdout
    TuningReport.objects.create(kind="plan", profile="throughput", result=json.loads(planned),
                                finished_at=timezone.now())
    shown = page(admin_client)
    assert "16 CPUs (8 cores x 2 threads, 1 NUMA node), 32.0 GiB" in shown
    assert ('<tr data-nic="eth0"><td>eth0</td><td>ixgbe</td><td class="num">10000 Mb/s</td>'
            '<td>PCIe gen2 x8</td><td class="num">27.2</td><td class="num">-</td>'
            '<td class="num">8 rx / 8 tx</td><td class="num">8</td>'
            '<td class="num">1500 / 9710</td></tr>') in shown
    assert '<span class="badge warn">smt</span> SMT (hyper-threading) is on' in shown
    assert "<td>512 → 4096</td>" in shown  # ethtool -G eth0 rx
    assert "(cpus " in shown  # masks with their CPUs, as tusk-tune prints them
