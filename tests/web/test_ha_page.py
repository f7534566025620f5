"""The High availability page (issue 23) against the real agent: the form's problems next
to their fields, this box's half applied by the agent (real keepalived and conntrackd in
its namespace, a peer box beside it), pending with a countdown until confirmed, the
roles live, and "Fail over now" handing the addresses to the peer. Viewers see the
state and change nothing."""
import html
import re
import time

from habox import HA_KEY, HA_VIRTUAL, ha_document, ha_status, in_pair
from kit import wait_until
from tuskweb import AGENT_NETNS, errors_of, wait

from ha.core import config as ha_config
from ha.forms import segments_text
from ha.models import HaState
from jobs.models import Job, PeriodicState
from tusklib.target import Target


def form_data(document=None, timeout=3600):
    document = document or ha_document()
    return {**{k: v for k, v in document["ha"].items() if not isinstance(v, bool) or v},
            "virtual": segments_text(document["virtual"]), "timeout": timeout, "key": HA_KEY}


def role_on_page(client, which="ha-role"):
    found = re.search(rf'id="{which}"[^>]*>([^<]*)<', client.get("/ha/").content.decode())
    return found.group(1) if found else None


def health(client):
    """{check: (badge, detail)} of the dashboard's health panel."""
    page = client.get("/dashboard/health/").content.decode()
    return {name: (badge, html.unescape(detail)) for name, badge, detail in re.findall(
        r'<tr data-check="([^"]+)">.*?<span class="badge ?([a-z]*)">.*?</span></td>\s*'
        r'<td>(.*?)</td></tr>', page, re.S)}


def test_the_health_panel_names_what_is_wrong_with_the_pair(admin_client):
    base = {"peer_address": "192.0.2.2", "stats": {"entries": 3, "injected": 2}}
    in_pair()
    cases = [
        ({"role": "MASTER", "peer": {"role": "BACKUP"}}, {"HA": "ok", "HA peer": "ok",
                                                         "HA sync": "ok"}, ""),
        ({"role": "MASTER", "peer": {"role": "MASTER"}}, {"HA peer": "bad"}, "split brain"),
        ({"role": "BACKUP", "peer": {"error": "the peer 192.0.2.2 does not answer"}},
         {"HA peer": "bad", "HA sync": "bad"}, "does not answer"),
        ({"role": "BACKUP", "peer": {"role": "BACKUP"}}, {"HA peer": "bad"},
         "no box holds the addresses"),
        ({"role": "MASTER", "peer": {"role": "BACKUP"},
          "running": {"keepalived": True, "conntrackd": False}, "stats": None},
         {"HA": "bad", "HA sync": "bad"}, "conntrackd stopped"),
    ]
    for changes, badges, detail in cases:
        PeriodicState.objects.update_or_create(
            name="ha.status", defaults={"result": ha_status(**{**base, **changes})})
        found = health(admin_client)
        assert {name: found[name][0] for name in badges} == badges, (changes, found)
        assert detail in " ".join(d for _, d in found.values()), found
    # a box alone: no configuration of a pair, confirmed or pending
    in_pair(confirmed=None, confirmed_text="")
    PeriodicState.objects.filter(name="ha.status").update(result=ha_status(role=None))
    assert not any(name.startswith("HA") for name in health(admin_client))


def test_a_forged_status_row_reads_as_nothing_reported(admin_client):
    """The row is the web user's to write: one not of ha.status's shape (ha/contracts.py)
    is no report - no banner, no HA checks, no traceback - on every page that reads it."""
    in_pair()
    forged = [{"role": "BACKUP", "at": time.time(), "running": "yes"},
              {**ha_status(role="BACKUP"), "at": "now"},
              {**ha_status(role="BACKUP"), "peer": {"role": ["MASTER"]}},
              {**ha_status(role="BACKUP"), "stats": {"entries": "many"}},
              ["not", "a", "table"]]
    for row in forged:
        PeriodicState.objects.update_or_create(name="ha.status", defaults={"result": row})
        found = health(admin_client)
        assert not any(name.startswith("HA") for name in found), (row, found)
        for url in ("/", "/policy/", "/ha/"):
            response = admin_client.get(url)
            assert response.status_code == 200, (row, url)
            assert 'id="ha-backup-banner"' not in response.content.decode(), (row, url)


def test_a_backup_says_on_every_page_that_the_master_replaces_its_policy(admin_client):
    in_pair()
    PeriodicState.objects.update_or_create(name="ha.status", defaults={
        "result": ha_status(role="BACKUP")})
    for url in ("/", "/policy/", "/tuning/", "/ha/"):
        assert 'id="ha-backup-banner"' in admin_client.get(url).content.decode(), url
    PeriodicState.objects.filter(name="ha.status").update(result=ha_status(role="MASTER"))
    assert 'id="ha-backup-banner"' not in admin_client.get("/policy/").content.decode()


def test_each_problem_lands_next_to_its_field_and_nothing_is_queued(admin_client):
    data = form_data(ha_document(advert_ms=15, peer_address="10.0.0.9"))
    data["virtual"] = "seg0 198.51.100.1/33\nsync0 198.51.100.7/24"
    response = admin_client.post("/ha/", data)
    assert response.status_code == 200
    errors = errors_of(response)
    assert "in steps of 10" in errors["advert_ms"][0]
    assert "is not on the sync link" in errors["peer_address"][0]
    assert any(e.startswith("virtual[0].addresses[0]:") for e in errors["virtual"]), errors
    assert any("virtual[1].interface" in e and "is the sync link" in e
               for e in errors["virtual"]), errors
    assert not Job.objects.exists()


CLUSTER_FORM = {"enabled": "on", "mode": "cluster", "sync_interface": "sync0",
                "sync_address": "192.168.255.3/24", "timeout": 120,
                # the pair's fields as the form's initial values leave them: not the
                # cluster's, so not in its document
                "role": "primary", "vrid": 51, "advert_ms": 1000}


def test_a_clusters_box_is_applied_from_the_form_without_a_pair_key(admin_client):
    """Issue 39 (docs/SCALE.md): the form's mode choice; a cluster's document holds only
    its keys, and a box that never had a pair key needs none (no peer channel)."""
    response = admin_client.post("/ha/", CLUSTER_FORM)
    assert response.status_code == 302, errors_of(response)
    job = Job.objects.get()
    assert job.kind == "ha.apply" and "key" not in job.args
    assert job.args["document"] == {"ha": {"enabled": True, "mode": "cluster",
                                           "sync_interface": "sync0",
                                           "sync_address": "192.168.255.3/24"},
                                    "virtual": []}


def test_a_clusters_problems_land_next_to_their_fields(admin_client):
    errors = errors_of(admin_client.post("/ha/", {**CLUSTER_FORM,
                                                  "virtual": "seg0 198.51.100.1/24"}))
    assert any("not in a cluster" in e for e in errors["virtual"]), errors
    errors = errors_of(admin_client.post("/ha/", {**CLUSTER_FORM,
                                                  "sync_address": "fd00::3/64"}))
    assert "IPv4" in errors["sync_address"][0]
    errors = errors_of(admin_client.post("/ha/", {**CLUSTER_FORM, "mode": "herd"}))
    assert "mode" in errors
    assert not Job.objects.exists()


def test_a_clusters_box_shows_no_role_or_peer_and_its_health_is_its_sync(admin_client):
    in_pair(confirmed_text='[ha]\nmode = "cluster"')
    stats = {"entries": 40, "injected": 27, "lost": 92383759}
    PeriodicState.objects.update_or_create(name="ha.status", defaults={"result": ha_status(
        role=None, cluster=True, running={"keepalived": False, "conntrackd": True},
        stats=stats)})
    page = admin_client.get("/ha/").content.decode()
    assert role_on_page(admin_client) == "one of a cluster sharing the load"
    assert "not used: a cluster runs no VRRP" in page and 'id="ha-failover"' not in page
    assert 'id="ha-backup-banner"' not in admin_client.get("/policy/").content.decode()
    found = health(admin_client)
    assert {name: found[name][0] for name in found if name.startswith("HA")} == \
        {"HA": "ok", "HA sync": "ok"}, found
    assert "27 put into this kernel from the other boxes" in found["HA sync"][1]
    # conntrackd's "lost" on a group counts the gaps between the boxes' own sequences
    assert "lost" not in found["HA sync"][1]
    PeriodicState.objects.filter(name="ha.status").update(result=ha_status(
        role=None, cluster=True, running={"keepalived": False, "conntrackd": False},
        stats=None))
    found = health(admin_client)
    assert found["HA"][0] == "bad" and "conntrackd stopped" in found["HA"][1]


def test_a_viewer_sees_the_state_and_cannot_apply_or_fail_over(viewer_client):
    in_pair()
    PeriodicState.objects.create(name="ha.status", result=ha_status(running={}))
    page = viewer_client.get("/ha/").content.decode()
    assert 'id="ha-role"' in page and 'id="ha-form"' not in page
    assert 'id="ha-failover"' not in page
    for url in ("/ha/", "/ha/failover/", "/ha/confirm/", "/ha/cancel/"):
        assert viewer_client.post(url, form_data()).status_code == 403
    assert not Job.objects.exists()


def test_apply_confirm_and_fail_over_through_the_agent(admin_client, agent, ha_peer):
    response = admin_client.post("/ha/", form_data())
    job = Job.objects.get(kind="ha.apply")
    assert response.status_code == 302 and response["Location"].endswith("?next=ha")
    assert wait(job, 60).state == "succeeded", (job.error, job.result)
    assert job.args["document"] == ha_document()
    page = admin_client.get("/ha/").content.decode()
    assert 'id="ha-pending"' in page and 'id="ha-countdown"' in page
    # the peer came up first and holds the address; without preemption this box, the
    # primary, joins as backup - until the peer's maintenance hands the address over
    target = Target(AGENT_NETNS)
    wait_until(lambda: role_on_page(admin_client) == "BACKUP", 20,
               lambda: f"this box BACKUP ({PeriodicState.last_result('ha.status')})")
    # the peer's notify script records its role: on a loaded machine, after the page's
    wait_until(lambda: ha_peer.role() == "MASTER", 20, "the peer MASTER")
    # the peer's own word, over the sync link, signed with the pair key
    wait_until(lambda: role_on_page(admin_client, "ha-peer-role") == "MASTER", 10,
               lambda: f"the peer MASTER on the page ({PeriodicState.last_result('ha.status')})")
    assert ha_peer.fail_over() == "BACKUP"
    wait_until(lambda: role_on_page(admin_client) == "MASTER", 20, "this box MASTER")
    assert HA_VIRTUAL.split("/")[0] in target.run(["ip", "-4", "addr", "show", "seg0"]).stdout
    admin_client.post("/ha/confirm/")
    confirm = Job.objects.get(kind="ha.confirm")
    assert wait(confirm, 30).state == "succeeded", confirm.error
    page = admin_client.get("/ha/").content.decode()
    assert 'id="ha-pending"' not in page and 'id="ha-failover"' in page
    found = health(admin_client)
    assert {name: found[name][0] for name in ("HA", "HA peer", "HA sync")} == \
        {"HA": "ok", "HA peer": "ok", "HA sync": "ok"}, found
    assert ha_config.parse(HaState.current().confirmed_text) == \
        ha_config.from_document(ha_document())
    # the history: the apply, confirmed, and its ha.toml against nothing before it
    history = admin_client.get("/ha/history/").content.decode()
    assert re.search(r'href="/ha/history/1/">1</a>.*?apply</td><td>confirmed', history, re.S)
    revision = admin_client.get("/ha/history/1/").content.decode()
    assert "+role = &quot;primary&quot;" in revision and HA_KEY not in revision
    # maintenance: the peer takes over, this box stays backup
    admin_client.post("/ha/failover/")
    failover = Job.objects.get(kind="ha.failover")
    assert wait(failover, 60).state == "succeeded", failover.error
    assert failover.result == {"role": "BACKUP"}
    wait_until(lambda: ha_peer.role() == "MASTER", 20, "the peer MASTER")
    wait_until(lambda: (role_on_page(admin_client), role_on_page(admin_client, "ha-peer-role"))
               == ("BACKUP", "MASTER"), 10, "the roles swapped on the page")
    assert HA_VIRTUAL.split("/")[0] not in target.run(["ip", "-4", "addr", "show",
                                                       "seg0"]).stdout
    # a backup has nothing to hand over: the button is gone, the view refuses
    assert 'id="ha-failover"' not in admin_client.get("/ha/").content.decode()
    admin_client.post("/ha/failover/")
    assert Job.objects.filter(kind="ha.failover").count() == 1

