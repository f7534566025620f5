"""The commit-confirm kit (webui/commitkit/), one data-driven suite run over every domain
that declares itself (policy, network, HA, SNMP): its routes, its generic views (history, a
revision against the one before, Confirm and Roll back queueing the domain's job,
audited, refused to viewers), the one mirror of a real on-box store into the domain's
rows, and - against the real agent - the decisions refused when nothing is pending,
whatever the rows say. A fifth domain gets all of this by declaring itself."""
from datetime import datetime, timezone

import pytest
from django.urls import reverse
from tuskweb import wait

import ha.domain  # noqa: F401  (each domain registers itself when its app loads it)
import network.domain  # noqa: F401
import policy.domain  # noqa: F401
import snmp.domain  # noqa: F401
from accounts.models import AuditEntry
from commitkit import mirror
from commitkit.domain import all_domains
from jobs import queue
from jobs.models import Job
from jobs.registry import known_kinds
from tusklib.commit import Store

DOMAINS = sorted(all_domains().values(), key=lambda domain: domain.name)
IDS = [domain.name for domain in DOMAINS]


def test_four_domains_declare_themselves():
    assert IDS == ["ha", "network", "policy", "snmp"]


@pytest.mark.parametrize("domain", DOMAINS, ids=IDS)
def test_every_route_and_job_of_a_domain_exists(domain):
    for view in ("history", "confirm", "cancel"):
        if view != "confirm" or domain.name != "network":
            assert reverse(domain.url(view)).startswith("/"), view
    assert reverse(domain.url("revision"), args=[7]).endswith("/7/")
    assert {domain.kind("confirm"), domain.kind("cancel")} <= known_kinds()
    assert reverse(domain.status_url)


def revision(domain, number, text, outcome="confirmed"):
    return domain.revision_model.objects.create(
        number=number, created=datetime(2026, 11, number, tzinfo=timezone.utc),
        user="ada", action="apply", outcome=outcome, **{domain.diff_field: text})


@pytest.mark.parametrize("domain", DOMAINS, ids=IDS)
def test_the_history_lists_the_revisions_and_one_shows_its_diff(domain, admin_client):
    revision(domain, 1, "a = 1\n")
    revision(domain, 2, "a = 2\n", outcome="pending")
    page = admin_client.get(reverse(domain.url("history"))).content.decode()
    assert page.index(">2</a>") < page.index(">1</a>"), "newest first"
    assert "pending" in page and "ada" in page
    page = admin_client.get(reverse(domain.url("revision"), args=[2])).content.decode()
    assert "-a = 1" in page and "+a = 2" in page
    assert admin_client.get(reverse(domain.url("revision"), args=[3])).status_code == 404


@pytest.mark.parametrize("domain", DOMAINS, ids=IDS)
def test_roll_back_now_queues_the_domains_job_audited(domain, admin_client):
    response = admin_client.post(reverse(domain.url("cancel")))
    job = Job.objects.get(kind=domain.kind("cancel"))
    assert response.status_code == 302
    assert response["Location"] == reverse("job", args=[job.pk]) + f"?next={domain.status_url}"
    entry = AuditEntry.objects.latest("pk")
    assert (entry.action, entry.detail.get("job")) == (f"{domain.name} roll back", job.pk)
    assert admin_client.get(reverse(domain.url("cancel"))).status_code == 405


@pytest.mark.parametrize("domain", [d for d in DOMAINS if d.name != "network"],
                         ids=[i for i in IDS if i != "network"])
def test_confirm_queues_the_domains_job(domain, admin_client):
    admin_client.post(reverse(domain.url("confirm")))
    assert Job.objects.filter(kind=domain.kind("confirm")).count() == 1


@pytest.mark.parametrize("domain", DOMAINS, ids=IDS)
def test_a_viewer_reads_the_history_and_decides_nothing(domain, viewer_client):
    revision(domain, 1, "a = 1\n")
    assert viewer_client.get(reverse(domain.url("history"))).status_code == 200
    for view in ("confirm", "cancel", "rollback"):
        try:
            url = reverse(domain.url(view), args=[1] if view == "rollback" else [])
        except Exception:       # noqa: BLE001  (a domain without that decision)
            continue
        assert viewer_client.post(url).status_code == 403, url
    assert not Job.objects.exists()


def store_with_revisions(path):
    """A real commit-confirm store (tusklib/commit.py): revision 1 confirmed, 2 pending."""
    store = Store(str(path), error=lambda failure, message: RuntimeError(message))
    first = store.create("ada", "apply", {"config": "a = 1\n"})
    first.update(outcome="confirmed")
    store.set_confirmed(first.id)
    second = store.create("bob", "apply", {"config": "a = 2\n"})
    store.set_pending(second.id, first.id, 120)
    return store


@pytest.mark.parametrize("domain", DOMAINS, ids=IDS)
def test_the_mirror_copies_a_real_store_into_the_domains_rows(domain, db, tmp_path):
    store = store_with_revisions(tmp_path)
    fields = {domain.diff_field: "x"}
    revision(domain, 5, "not in the store\n")
    mirror.copy_revisions(domain.revision_model, store,
                          lambda revision: {domain.diff_field: revision.read("config")})
    rows = list(domain.revision_model.objects.values_list("number", "user", "outcome",
                                                          domain.diff_field))
    # revision 5 is not in the store: a row nobody applied is not history
    assert rows == [(2, "bob", "pending", "a = 2\n"), (1, "ada", "confirmed", "a = 1\n")]
    state = mirror.write_state(domain.state_model, store)
    assert (state.confirmed, state.pending) == (1, 2)
    assert 0 < state.seconds_left(datetime.now(timezone.utc)) <= 120
    # a decided revision is read once; the pending one again until it is decided
    domain.revision_model.objects.filter(number=1).update(**fields)
    store.get(2).update(outcome="confirmed")
    store.set_confirmed(2)
    store.clear_pending()
    mirror.copy_revisions(domain.revision_model, store,
                          lambda revision: {domain.diff_field: revision.read("config")})
    assert domain.revision_model.objects.get(number=1).outcome == "confirmed"
    assert getattr(domain.revision_model.objects.get(number=1), domain.diff_field) == "x"
    assert domain.revision_model.objects.get(number=2).outcome == "confirmed"
    state = mirror.write_state(domain.state_model, store)
    assert (state.confirmed, state.pending, state.seconds_left(None)) == (2, None, None)


@pytest.mark.parametrize("domain", DOMAINS, ids=IDS)
def test_forged_rows_do_not_make_the_agent_decide(domain, agent):
    """The rows are the web user's to write (role tusk): a forged pending revision is
    no pending change to the agent, which asks its own store; a forged argument is
    refused; the next sync puts the rows back as the store has them."""
    revision(domain, 9, "forged\n", outcome="pending")
    domain.state_model.objects.update_or_create(pk=1, defaults={"pending": 9})
    for decision in ("confirm", "cancel"):
        job = wait(queue.enqueue(domain.kind(decision), {}), 60)
        assert job.state == "failed" and "nothing awaits confirmation" in job.error, \
            (decision, job.error)
        job = wait(queue.enqueue(domain.kind(decision), {"revision": 9}), 60)
        assert job.state == "failed" and "unknown argument" in job.error, job.error
    assert domain.state_model.current().pending is None
    assert not domain.revision_model.objects.filter(number=9).exists()
