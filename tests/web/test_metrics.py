"""/metrics and the Metrics page against the real database: scrape tokens (admins make
and revoke them, shown once, kept hashed, audited), the scrape's refusals, the exposition
of what the rows hold (parsed with prometheus_client's own parser), the traffic classes
list's hit counters, and rows forged by the web user's role. The agent's side, with real
traffic through a real ruleset: test_metrics_agent.py."""
import hashlib
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.utils import timezone
from flowsample import flow_sample
from prometheus_client.parser import text_string_to_metric_families
from tuskweb import errors_of

from accounts.models import AuditEntry, Token
from dashboard.models import Sample
from jobs.models import AgentHeartbeat, Job, PeriodicState
from metrics.collector import FAMILIES, SEQADJ
from policy import draft as drafts
from policy.counters import carried_over, merge
from policy.models import CounterReading

DOCS = Path(__file__).resolve().parents[2] / "docs" / "METRICS.md"
POLICY = """zones:
  - {name: inside, interfaces: [eth1]}
  - {name: outside, interfaces: [eth2]}
services:
  - {name: https, protocol: tcp, ports: [443]}
classes:
  - {name: web, from: inside, to: outside, services: [https], action: accept}
  - {name: idle, from: outside, to: inside, action: accept}
  - {name: drafted, from: inside, to: outside, action: drop}
"""


def make_token(client, name="prometheus"):
    response = client.post("/metrics/tokens/", {"name": name})
    assert response.status_code == 201, errors_of(response)
    return re.search(r'<pre id="token-value">([^<]+)</pre>', response.content.decode()).group(1)


def scrape(token=None, client=None, **headers):
    client = client or Client()
    if token is not None:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return client.get("/metrics", **headers)


def samples(response):
    """{(sample name, frozenset of labels): value} of a scrape, by prometheus_client."""
    assert response.status_code == 200, response.content
    found = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(found, name, **labels):
    return found[(name, frozenset(labels.items()))]


def test_the_token_page_is_for_admins_only(viewer_client):
    assert viewer_client.get("/metrics/tokens/").status_code == 403
    assert viewer_client.post("/metrics/tokens/", {"name": "x"}).status_code == 403
    assert Client().get("/metrics/tokens/")["Location"].startswith("/accounts/login/")
    assert not Token.objects.exists()


def test_a_token_is_shown_once_and_kept_only_as_its_sha256(admin_client):
    token = make_token(admin_client, "prometheus.example.net")
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", token)
    row = Token.objects.get()
    assert row.sha256 == hashlib.sha256(token.encode()).hexdigest()
    assert (row.name, row.created_by.username) == ("prometheus.example.net", "alice")
    entry = AuditEntry.objects.get(action="metrics token create")
    assert entry.target == "prometheus.example.net" and entry.detail == {
        "token": row.pk, "scope": "metrics", "days": 365, "allowed_from": []}
    # in no column of any table: not the token's row, the audit log, nor a session
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT count(*) FROM "{table}" t WHERE row_to_json(t)::text '
                           "LIKE %s", [f"%{token}%"])
            assert cursor.fetchone()[0] == 0, f"the token is stored in clear in {table}"
    page = admin_client.get("/metrics/tokens/")
    assert token not in page.content.decode() and "prometheus.example.net" in page.content.decode()
    assert "no-store" in page["Cache-Control"]


@pytest.mark.parametrize("name, message", [
    ("", "This field is required."),
    ("-leading dash", "starting with a letter or digit"),
    ("prom<script>", "Letters, digits, spaces"),
    ("p" * 65, "at most 64 characters"),
])
def test_a_bad_token_name_is_refused_by_field(admin_client, name, message):
    response = admin_client.post("/metrics/tokens/", {"name": name})
    assert response.status_code == 400
    assert any(message in m for m in errors_of(response)["name"]), errors_of(response)
    assert not Token.objects.exists()
    assert not AuditEntry.objects.filter(action="metrics token create").exists()


def test_a_scrape_needs_a_valid_unrevoked_token_and_never_a_session(admin_client):
    token = make_token(admin_client)
    missing = scrape()
    assert missing.status_code == 401
    assert missing["WWW-Authenticate"] == 'Bearer realm="tusk metrics"'
    assert b"tusk_" not in missing.content
    wrong = scrape("A" * 43)
    assert wrong.status_code == 401
    assert 'error="invalid_token"' in wrong["WWW-Authenticate"]
    for refused in (scrape(token[:-1]), scrape(token + "A"), scrape(client=admin_client),
                    Client().get(f"/metrics?token={token}"),
                    scrape(HTTP_AUTHORIZATION=f"Basic {token}"),
                    scrape(HTTP_AUTHORIZATION=token)):
        assert refused.status_code == 401 and b"tusk_" not in refused.content
    good = scrape(token)
    assert good.status_code == 200
    assert good["Content-Type"].startswith("text/plain; version=")
    assert "no-store" in good["Cache-Control"]
    row = Token.objects.get()
    assert row.last_used_at is not None
    # read-only: it takes no body, whoever sends one
    assert Client().post("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 405

    response = admin_client.post(f"/metrics/tokens/{row.pk}/revoke/")
    assert response.status_code == 302
    revoked = scrape(token)
    assert (revoked.status_code, revoked.content, revoked["WWW-Authenticate"]) == \
        (wrong.status_code, wrong.content, wrong["WWW-Authenticate"])   # says nothing more
    assert AuditEntry.objects.filter(action="metrics token revoke", target="prometheus").exists()
    assert "revoked" in admin_client.get("/metrics/tokens/").content.decode()


def test_a_viewer_cannot_revoke_a_token(admin_client, viewer_user):
    token = make_token(admin_client)
    viewer = Client()
    viewer.force_login(viewer_user)
    assert viewer.post(f"/metrics/tokens/{Token.objects.get().pk}/revoke/").status_code \
        == 403
    assert scrape(token).status_code == 200


def test_the_scrape_needs_no_password_change_and_no_login(admin_client, admin_user):
    """The scrape takes its token alone: a session of a user who must change the password
    neither sends it to the password page nor stands in for the token."""
    token = make_token(admin_client)
    admin_user.profile.must_change_password = True
    admin_user.profile.save()
    assert admin_client.get("/policy/")["Location"] == "/accounts/password/"
    assert scrape(token, client=admin_client).status_code == 200
    assert scrape(client=admin_client).status_code == 401


def reading(counters, read_at=None, loaded=True):
    now = read_at or timezone.now()
    return CounterReading.objects.update_or_create(pk=1, defaults={
        "read_at": now, "observed_since": now - timedelta(minutes=5), "table_loaded": loaded,
        "counters": counters})[0]


def test_the_scrape_exports_what_the_agent_stored(admin_client, tmp_path):
    token = make_token(admin_client)
    now = timezone.now()
    Sample.objects.create(taken=now, conntrack_count=42, conntrack_max=65536, softirqs={},
                          interfaces={"eth1": {
                              "rx_bytes": 1000, "tx_bytes": 2000, "rx_packets": 10,
                              "tx_packets": 20, "rx_dropped": 1, "tx_dropped": 2,
                              "rx_errors": 3, "tx_errors": 4, "operstate": "UP"}},
                          seqadj={"sack_blocks_translated": 7, "seqrand_initiator_randomised": 5,
                                  "seqrand_skipped_signed": 2,
                                  "flowtable_packets_translated": 90})
    hit = round(now.timestamp() - 30, 3)
    reading({"class_web": [12, 3400, hit], "class_idle": [0, 0, None],
             "invalid": [3, 180, None], "default_deny": [9, 540, hit]})
    AgentHeartbeat.objects.create(agent="host:1:1", started_at=now - timedelta(hours=1),
                                  seen_at=now - timedelta(seconds=2))
    PeriodicState.objects.create(name="policy.counters", interval=2, runs=30, failures=2,
                                 skipped=1, started_at=now, duration=0.25, error="boom")
    for state in ("queued", "failed", "failed", "succeeded"):
        Job.objects.create(kind="agent.ping", state=state)
    Job.objects.filter(state="queued").update(created_at=now - timedelta(seconds=40))
    (Path(settings.TUSK.capture_dir)).mkdir(parents=True, exist_ok=True)

    found = samples(scrape(token))
    assert value(found, "tusk_interface_receive_bytes_total", interface="eth1") == 1000
    assert value(found, "tusk_interface_transmit_packets_total", interface="eth1") == 20
    assert value(found, "tusk_interface_receive_drops_total", interface="eth1") == 1
    assert value(found, "tusk_interface_transmit_errors_total", interface="eth1") == 4
    assert value(found, "tusk_interface_up", interface="eth1") == 1
    assert value(found, "tusk_conntrack_entries") == 42
    assert value(found, "tusk_conntrack_entries_limit") == 65536
    assert value(found, "tusk_seqadj_counters_available") == 1
    assert value(found, "tusk_seqadj_sack_blocks_translated_total") == 7
    assert value(found, "tusk_seqrand_initiator_randomised_total") == 5
    assert value(found, "tusk_seqrand_skipped_signed_total") == 2
    assert value(found, "tusk_seqadj_flowtable_packets_translated_total") == 90
    assert ("tusk_seqrand_dropped_nomem_total", frozenset()) not in found   # not in the file
    assert value(found, "tusk_class_packets_total", **{"class": "web"}) == 12
    assert value(found, "tusk_class_bytes_total", **{"class": "web"}) == 3400
    assert value(found, "tusk_class_last_hit_timestamp_seconds", **{"class": "web"}) == hit
    assert value(found, "tusk_class_packets_total", **{"class": "idle"}) == 0
    assert ("tusk_class_last_hit_timestamp_seconds", frozenset({("class", "idle")})) \
        not in found
    assert value(found, "tusk_dropped_packets_total", reason="invalid") == 3
    assert value(found, "tusk_dropped_bytes_total", reason="default_deny") == 540
    assert 1.5 < value(found, "tusk_agent_heartbeat_age_seconds") < 30
    labels = {"task": "policy.counters"}
    assert value(found, "tusk_agent_task_runs_total", **labels) == 30
    assert value(found, "tusk_agent_task_failures_total", **labels) == 2
    assert value(found, "tusk_agent_task_skipped_total", **labels) == 1
    assert value(found, "tusk_agent_task_failing", **labels) == 1
    assert value(found, "tusk_agent_task_last_duration_seconds", **labels) == 0.25
    assert value(found, "tusk_jobs", state="failed") == 2
    assert value(found, "tusk_jobs", state="running") == 0
    assert 39 < value(found, "tusk_job_queue_wait_seconds") < 100
    assert value(found, "tusk_capture_storage_quota_bytes") == \
        settings.TUSK.capture_quota_mb * 1_000_000


def test_the_classes_list_shows_each_classs_hits(admin_client, admin_user):
    drafts.import_text(POLICY, admin_user)
    hit = timezone.now() - timedelta(seconds=30)
    reading({"class_web": [12, 3400, round(hit.timestamp(), 3)], "class_idle": [0, 0, None],
             "invalid": [0, 0, None], "default_deny": [0, 0, None]})
    page = admin_client.get("/policy/classes/").content.decode()
    rows = {name: row for row in re.findall(r"<tr>(.*?)</tr>", page, re.S)
            for name in re.findall(r'/">([a-z]+)</a>', row)}
    assert 'data-packets="12" data-bytes="3400"' in rows["web"]
    assert "12 pkt, 3.4 kB" in rows["web"]
    assert re.search(r'data-last-hit="[^"]+">last hit 3\d s ago', rows["web"]), rows["web"]
    assert 'data-packets="0"' in rows["idle"] and "no hits" in rows["idle"]
    assert "not applied" in rows["drafted"]
    assert "rule matched in the live ruleset, read 0 s ago" in page

    reading({}, loaded=False)
    page = admin_client.get("/policy/classes/").content.decode()
    assert page.count("no ruleset loaded") == 3 and "no Tusk ruleset is loaded" in page
    CounterReading.objects.all().delete()
    assert admin_client.get("/policy/classes/").content.decode().count("not read yet") == 3
    # the other sections have no such column
    assert "Hits" not in admin_client.get("/policy/zones/").content.decode()


def test_forged_rows_break_neither_the_exposition_nor_the_classes_list(admin_client,
                                                                        admin_user):
    """Rows the web user's role wrote past the agent: a label value that tries to end the
    line and add a sample of its own, values that are no numbers. Each bad value drops
    its own sample; the rest is exported, escaped, and the list page is escaped too."""
    token = make_token(admin_client)
    drafts.import_text(POLICY, admin_user)
    evil = 'eth1"} 1\ntusk_injected 1\n#'
    Sample.objects.create(taken=timezone.now(), conntrack_count=None, softirqs={},
                          interfaces={evil: {"rx_bytes": 5, "tx_bytes": "many",
                                             "rx_packets": None, "tx_packets": [1],
                                             "rx_dropped": True, "operstate": {"x": 1}},
                                      "eth2": "not a dict"},
                          seqadj={"sack_blocks_translated": "1; rm -rf /",
                                  "icmp_quotes_translated": 10 ** 400},
                          loss={"softnet.dropped": 7, f"nic.rx_crc@{evil}": 2,
                                "nic.rx_missed@eth1": 10 ** 400, "conntrack.drop": -5,
                                "conntrack.early_drop": True, "qdisc.drops": 3,
                                "softnet.dropped@eth1": 4, "bogus@eth1": 1,
                                "conntrack.invalid": "9"})
    reading({"class_web": ["<b>12</b>", 3400, "yesterday"],
             "class_idle": [1e300, 1e300, 1e300],
             'class_x"} 7\ntusk_injected': [1, 2, None],
             "class_<script>": [1, 2, 3], "invalid": "junk", "default_deny": [1, 2]})
    found = samples(scrape(token))
    assert value(found, "tusk_interface_receive_bytes_total", interface=evil) == 5
    assert not any(name == "tusk_injected" for name, _ in found)
    for name in ("tusk_interface_transmit_bytes_total", "tusk_interface_receive_packets_total",
                 "tusk_interface_transmit_packets_total", "tusk_interface_receive_drops_total"):
        assert not any(n == name for n, _ in found), name
    assert value(found, "tusk_class_packets_total", **{"class": 'x"} 7\ntusk_injected'}) == 1
    assert value(found, "tusk_class_packets_total", **{"class": "idle"}) == 1e300
    assert ("tusk_class_packets_total", frozenset({("class", "web")})) not in found
    assert not any(name.startswith("tusk_dropped") for name, _ in found)
    assert ("tusk_seqadj_sack_blocks_translated_total", frozenset()) not in found
    assert ("tusk_seqadj_icmp_quotes_translated_total", frozenset()) not in found
    # the loss path: a count only where stage, interface and number are what they must be
    lost = {dict(labels)["stage"] + "@" + dict(labels)["interface"]: number
            for (name, labels), number in found.items() if name == "tusk_loss_packets_total"}
    assert lost == {"softnet.dropped@": 7, f"nic.rx_crc@{evil}": 2}, lost

    page = admin_client.get("/policy/classes/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "<b>12</b>" not in html and "<script>" not in html
    assert "not applied" in html   # class web: its forged packets are no number
    CounterReading.objects.filter(pk=1).update(counters=[["class_web", 1, 2, 3]])
    assert "not applied" in admin_client.get("/policy/classes/").content.decode()
    assert not any(name.startswith("tusk_class") for name, _ in samples(scrape(token)))


def test_every_metric_is_documented_and_listed_on_the_page(admin_client):
    documented = DOCS.read_text()
    for family in FAMILIES.values():
        assert f"`{family.exposed}`" in documented, family.exposed
    for line in SEQADJ:
        assert f"`{line}`" in documented, line
    page = admin_client.get("/metrics/tokens/").content.decode()
    assert all(f"<code>{family.exposed}</code>" in page for family in FAMILIES.values())


NOW = 1_800_000_000.0


def test_a_counter_grows_and_keeps_its_last_hit():
    first = merge(None, {"class_a": (0, 0), "class_b": (5, 500)}, NOW)
    assert first == {"class_a": [0, 0, None], "class_b": [5, 500, None]}   # before: unknown
    before = {name: tuple(v) for name, v in first.items()}
    second = merge(before, {"class_a": (2, 120), "class_b": (5, 500), "class_c": (1, 60)},
                   NOW + 2)
    # a grows; b does not; c is new since the reading before (an apply), from zero
    assert second == {"class_a": [2, 120, NOW + 2], "class_b": [5, 500, None],
                      "class_c": [1, 60, NOW + 2]}
    before = {name: tuple(v) for name, v in second.items()}
    # every apply replaces the table: a counter lower than before started again
    third = merge(before, {"class_a": (1, 60), "class_b": (0, 0), "class_c": (1, 60)}, NOW + 4)
    assert third == {"class_a": [1, 60, NOW + 4], "class_b": [0, 0, None],
                     "class_c": [1, 60, NOW + 2]}


def test_a_starting_agent_carries_over_only_well_formed_entries(db):
    row = reading({"class_a": [3, 300, NOW - 10], "class_b": [1, "x", None],
                   "class_c": [1, 2, NOW + 3600], "class_d": [1, 2], "class_e": [-1, 2, None],
                   "class_f": [True, 2, None], "class_g": [1, 2, "1800000000"]},
                  read_at=datetime.fromtimestamp(NOW, UTC))
    since, entries = carried_over(row, NOW)
    assert since == NOW - 300 and entries == {"class_a": (3, 300, NOW - 10)}
    row.observed_since = datetime.fromtimestamp(NOW + 60, UTC)
    assert carried_over(row, NOW) == (NOW, None)
    assert carried_over(None, NOW) == (NOW, None)


def test_elephants_per_class_by_the_name_of_the_live_revision(admin_client):
    """The Flows sampler's last whole pass counts, per class ordinal (the ct mark), the
    connections past 1 MB and their bytes; /metrics names the class from the revision
    loaded now. Forged parts of the row are left out."""
    from flows.agent_jobs import SAMPLE
    from policy.models import Revision, TargetState
    token = make_token(admin_client)
    Revision.objects.create(number=3, created=timezone.now(), user="t", action="apply",
                            outcome="confirmed", policy_text=POLICY, ruleset="",
                            ruleset_sha256="0" * 64, meta={})
    TargetState.objects.update_or_create(pk=1, defaults={"confirmed": 3})
    PeriodicState.objects.create(name=SAMPLE, result=flow_sample(**{"pass": {
        "number": 3, "read": None, "last": {"classes": {
            "1": [2, 5_000_000], "2": [1, 1 << 21], "0": [4, 9], "9": [1, 1], "x": [1, 1],
            "1" * 5000: [1, 1], "3": "junk"}}}}))
    found = samples(scrape(token))
    assert value(found, "tusk_class_elephant_connections", **{"class": "web"}) == 2
    assert value(found, "tusk_class_elephant_bytes", **{"class": "web"}) == 5_000_000
    assert value(found, "tusk_class_elephant_bytes", **{"class": "idle"}) == 1 << 21
    labelled = {dict(labels)["class"] for name, labels in found
                if name == "tusk_class_elephant_bytes"}
    assert labelled == {"web", "idle"}, labelled


@pytest.mark.django_db(transaction=True)
def test_the_counter_reading_moves_to_the_policy_app_with_its_row():
    """CounterReading moved from metrics to policy (issue 37): the table is taken over and
    renamed, so the last hits an agent carries over survive the upgrade."""
    from django.db.migrations.executor import MigrationExecutor
    MigrationExecutor(connection).migrate([("metrics", "0001_initial"),
                                           ("policy", "0001_initial")])
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO metrics_counterreading (id, read_at, observed_since, "
                       "table_loaded, counters) VALUES (1, now(), now(), true, %s)",
                       ['{"class_web": [3, 180, 1795961385]}'])
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    row = CounterReading.objects.get(pk=1)
    assert row.counters == {"class_web": [3, 180, 1795961385]} and row.table_loaded
    assert "metrics_counterreading" not in connection.introspection.table_names()


@pytest.mark.django_db(transaction=True)
def test_an_upgrade_keeps_every_scrape_token_scraping(admin_user):
    """The scrape tokens of a release before issue 38 become tokens of scope metrics,
    the same hashes, names and makers, valid for a year from the upgrade."""
    executor = MigrationExecutor(connection)
    before = [("metrics", "0002_counterreading_to_policy"), ("accounts", "0003_models_ordering")]
    executor.migrate(before)
    old = executor.loader.project_state(before).apps.get_model("metrics", "ScrapeToken")
    token = "T" * 43
    old.objects.create(name="prometheus", sha256=hashlib.sha256(token.encode()).hexdigest(),
                       created_by_id=admin_user.pk)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    row = Token.objects.get()
    assert (row.name, row.scope, row.created_by) == ("prometheus", "metrics", admin_user)
    assert timedelta(days=364) < row.expires_at - timezone.now() <= timedelta(days=365)
    assert scrape(token).status_code == 200


def test_routing_sessions_are_exposed_and_a_forged_row_exposes_nothing(admin_client):
    from network import draft as network_drafts
    token = make_token(admin_client)
    PeriodicState.objects.update_or_create(name=network_drafts.ROUTING, defaults={"result": {
        "running": True, "at": NOW,
        "sessions": [{"address": "10.20.0.2", "remote_as": 65010, "state": "Established",
                      "up_seconds": 42, "received": 3, "sent": 1},
                     {"address": "fd00:20::2", "remote_as": 65010, "state": "Active",
                      "up_seconds": 0, "received": 0, "sent": 0}],
        "bfd": [{"peer": "10.20.0.2", "status": "up"}],
        "ospf": [{"neighbour": "10.20.0.2", "version": 3, "interface": "veth-s",
                  "state": "Full"}]}})
    found = samples(scrape(token))
    assert found[("tusk_routing_running", frozenset())] == 1
    assert found[("tusk_bgp_session_up", frozenset(
        {("neighbour", "10.20.0.2"), ("remote_as", "65010")}))] == 1
    assert found[("tusk_bgp_session_up", frozenset(
        {("neighbour", "fd00:20::2"), ("remote_as", "65010")}))] == 0
    assert found[("tusk_bgp_prefixes_received", frozenset({("neighbour", "10.20.0.2")}))] == 3
    assert found[("tusk_bfd_peer_up", frozenset({("peer", "10.20.0.2")}))] == 1
    assert found[("tusk_ospf_neighbour_full", frozenset(
        {("neighbour", "10.20.0.2"), ("interface", "veth-s"), ("version", "3")}))] == 1
    PeriodicState.objects.update_or_create(name=network_drafts.FACTS, defaults={"result": {
        "ports": {}, "addresses": {}, "at": NOW, "routes": [
            {"destination": "10.30.0.0/24", "gateway": "10.20.0.2", "interface": "veth-s",
             "metric": 20, "protocol": "bgp", "family": 4},
            {"destination": "10.31.0.0/24", "gateway": "10.20.0.2", "interface": "veth-s",
             "metric": 20, "protocol": "bgp", "family": 4},
            {"destination": "fd00:50::/64", "gateway": "fe80::1", "interface": "veth-s",
             "metric": 20, "protocol": "ospf", "family": 6}]}})
    found = samples(scrape(token))
    assert found[("tusk_routes", frozenset({("protocol", "bgp"), ("family", "4")}))] == 2
    assert found[("tusk_routes", frozenset({("protocol", "ospf"), ("family", "6")}))] == 1
    PeriodicState.objects.filter(name=network_drafts.ROUTING).update(result={
        "running": True, "at": NOW, "sessions": [{"address": 'x"} 1\nevil 1'}], "bfd": [],
        "ospf": []})
    found = samples(scrape(token))
    assert not any(name.startswith(("tusk_bgp", "tusk_routing")) for name, _ in found)
