"""The alert rules Tusk ships (webui/metrics/rules/tusk-alerts.yml, issue 40) and the
metrics they need: Prometheus's own promtool checks the file and runs every alert
against series in /metrics's shape (tests/unit/alert_rules_test.yml), every metric a
rule names is one the box exposes, every alert has a case where it fires; the HA and
certificate families from the agent's rows (forged ones expose nothing); the rules
download from the Metrics page; the agent's certificate task reads a real
certificate with openssl."""
import re
import shutil
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from test_metrics import make_token, samples, scrape

from ha.agent_jobs import STATUS
from jobs.models import PeriodicState
from metrics.collector import FAMILIES
from metrics.views import RULES
from system.agent_jobs import CERTIFICATE_TASK, certificate, not_after

CASES = Path(__file__).resolve().parents[1] / "unit" / "alert_rules_test.yml"


def promtool(*args):
    if shutil.which("promtool") is None:
        pytest.fail("missing: promtool (Debian package prometheus) - run `make test`")
    return subprocess.run(["promtool", *args], capture_output=True, text=True,
                          cwd=CASES.parent, check=False)


def test_promtool_checks_the_rules_and_every_alert_passes_its_cases():
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", CASES.name)
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr


def test_every_rule_names_metrics_the_box_exposes_and_fires_in_a_case():
    rules = [rule for group in yaml.safe_load(RULES.read_text())["groups"]
             for rule in group["rules"]]
    exposed = {family.exposed for family in FAMILIES.values()}
    for rule in rules:
        named = set(re.findall(r"\btusk_[a-z_]+", rule["expr"]))
        assert named and named <= exposed, (rule["alert"], named - exposed)
    fired = {case["alertname"] for test in yaml.safe_load(CASES.read_text())["tests"]
             for case in test["alert_rule_test"] if case.get("exp_alerts")}
    assert {rule["alert"] for rule in rules} == fired


def test_the_rules_download_from_the_metrics_page(admin_client):
    page = admin_client.get("/metrics/tokens/").content.decode()
    assert 'href="/metrics/tusk-alerts.yml"' in page
    response = admin_client.get("/metrics/tusk-alerts.yml")
    assert response.status_code == 200 and response.content == RULES.read_bytes()
    assert "attachment" in response["Content-Disposition"]


def ha_row(**changes):
    row = {"role": "MASTER", "running": {"keepalived": True, "conntrackd": True},
           "stats": {"entries": 12, "injected": 40, "inject_failures": 0, "lost": 3,
                     "malformed": 0, "send_errors": 1, "recv_errors": 0},
           "has_key": True, "listener_error": None,
           "peer": {"error": None, "role": "BACKUP", "running": {}, "policy": {},
                    "tuning": None, "at": 1.0},
           "peer_address": "10.9.9.2", "config_sync": None, "tuning_sync": None,
           "at": 1_800_000_000.0, "cluster": False}
    row.update(changes)
    return row


def test_the_ha_state_is_exposed_for_a_pair_a_cluster_and_a_box_alone(admin_client):
    token = make_token(admin_client)
    PeriodicState.objects.update_or_create(name=STATUS, defaults={"result": ha_row()})
    found = samples(scrape(token))
    for name, labels, expected in (
            ("tusk_ha_enabled", {}, 1), ("tusk_ha_master", {}, 1),
            ("tusk_ha_peer_reachable", {}, 1), ("tusk_ha_peer_master", {}, 0),
            ("tusk_ha_daemon_running", {"daemon": "conntrackd"}, 1),
            ("tusk_ha_sync_entries", {}, 12), ("tusk_ha_sync_injected_total", {}, 40),
            ("tusk_ha_sync_errors_total", {"kind": "lost"}, 3),
            ("tusk_ha_sync_errors_total", {"kind": "send_errors"}, 1),
            ("tusk_ha_status_timestamp_seconds", {}, 1_800_000_000.0)):
        assert found[(name, frozenset(labels.items()))] == expected, name
    # a cluster's box: no role, no peer, no "lost" (meaningless on a multicast group)
    PeriodicState.objects.filter(name=STATUS).update(result=ha_row(
        role=None, peer=None, peer_address=None, cluster=True))
    found = samples(scrape(token))
    names = {name for name, _ in found}
    assert not names & {"tusk_ha_master", "tusk_ha_peer_master", "tusk_ha_peer_reachable"}
    assert ("tusk_ha_sync_errors_total", frozenset({("kind", "lost")})) not in found
    # alone: enabled 0 and nothing else of HA
    PeriodicState.objects.filter(name=STATUS).update(result=ha_row(
        role=None, peer=None, peer_address=None, running={"keepalived": False,
                                                          "conntrackd": False}))
    found = samples(scrape(token))
    assert {n for n, _ in found if n.startswith("tusk_ha_")} == {
        "tusk_ha_enabled", "tusk_ha_status_timestamp_seconds"}
    assert found[("tusk_ha_enabled", frozenset())] == 0
    # a row forged into another shape exposes nothing of HA
    PeriodicState.objects.filter(name=STATUS).update(result={"role": 'x"} 1\nevil 1'})
    assert not any(n.startswith("tusk_ha_") for n, _ in samples(scrape(token)))


def test_the_certificates_end_is_read_by_openssl_and_exposed(admin_client, tmp_path):
    crt, key = tmp_path / "tusk.crt", tmp_path / "tusk.key"
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                           "ec_paramgen_curve:P-256", "-nodes", "-days", "30", "-subj",
                           "/CN=tusk", "-keyout", str(key), "-out", str(crt)],
                          capture_output=True, text=True, check=False)
    assert made.returncode == 0, made.stderr
    agent = SimpleNamespace(config=SimpleNamespace(tls_certificate=str(crt)))
    found = certificate(agent)
    assert abs(found["not_after"] - (time.time() + 30 * 86400)) < 120, found
    assert certificate(agent) == found          # unchanged: not read again
    renewed = subprocess.run(["openssl", "req", "-x509", "-key", str(key), "-days", "400",
                              "-subj", "/CN=tusk", "-out", str(crt)],
                             capture_output=True, text=True, check=False)
    assert renewed.returncode == 0, renewed.stderr
    assert abs(certificate(agent)["not_after"] - (time.time() + 400 * 86400)) < 120
    assert certificate(SimpleNamespace(config=SimpleNamespace(tls_certificate=""))) is None
    gone = certificate(SimpleNamespace(config=SimpleNamespace(
        tls_certificate=str(tmp_path / "none.crt"))))
    assert gone["not_after"] is None and "No such file" in gone["error"], gone
    broken = tmp_path / "broken.crt"
    broken.write_text("not a certificate\n")
    missing = certificate(SimpleNamespace(config=SimpleNamespace(tls_certificate=str(broken))))
    assert missing["not_after"] is None and missing["error"], missing
    assert not_after("notAfter=Nov  3 19:02:03 2027 GMT\n") == 1825268523.0
    with pytest.raises(ValueError):
        not_after("notBefore=Nov  3 19:02:03 2027 GMT")
    token = make_token(admin_client)
    PeriodicState.objects.update_or_create(name=CERTIFICATE_TASK, defaults={"result": found})
    exposed = samples(scrape(token))
    assert exposed[("tusk_certificate_expiry_timestamp_seconds", frozenset())] == \
        found["not_after"]
    assert exposed[("tusk_certificate_readable", frozenset())] == 1
    PeriodicState.objects.filter(name=CERTIFICATE_TASK).update(result=missing)
    exposed = samples(scrape(token))
    assert exposed[("tusk_certificate_readable", frozenset())] == 0
    assert ("tusk_certificate_expiry_timestamp_seconds", frozenset()) not in exposed
