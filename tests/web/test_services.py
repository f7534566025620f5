"""The services (issue 37, item 3): each domain's operations as functions with typed
arguments and results, the same the pages call, called here as another front end (the
API to come) would - with an Actor, no request. Refusals are typed: the domain's
problems (PolicyError, with paths) or a ServiceError whose code says stale, not found
or conflict; a refused operation queues, saves and audits nothing."""
import pytest

from accounts.audit import Actor
from accounts.models import AuditEntry
from commitkit import services as kit
from ha import services as ha_services
from ha.domain import DOMAIN as HA
from jobs.models import Job
from network import services as network_services
from network.models import NetworkState
from policy import draft as drafts
from policy import services
from policy.core.errors import PolicyError
from policy.domain import DOMAIN as POLICY
from tusklib.problems import Refusal, ServiceError

ZONES = {"version": 1, "zones": [{"name": "inside", "interfaces": ["eth1"]},
                                 {"name": "outside", "interfaces": ["eth2"]}],
         "address_sets": [], "services": [], "classes": []}


@pytest.fixture
def actor(admin_user):
    return Actor(user=admin_user, address="192.0.2.7")


def test_the_draft_is_replaced_whole_at_its_version_and_only_then(actor):
    version = drafts.get().version
    draft = services.replace_draft(actor, ZONES, version)
    assert draft.version == version + 1 and drafts.get().document["zones"] == ZONES["zones"]
    entry = AuditEntry.objects.latest("pk")
    assert (entry.action, entry.address, entry.user) == \
        ("policy draft replaced", "192.0.2.7", actor.user)
    with pytest.raises(ServiceError) as stale:
        services.replace_draft(actor, {**ZONES, "zones": []}, version)
    assert stale.value.code == Refusal.STALE and stale.value.path == "version"
    bad = {**ZONES, "classes": [{"name": "x", "from": "inside", "to": "nowhere",
                                 "action": "accept"}]}
    with pytest.raises(PolicyError) as invalid:
        services.replace_draft(actor, bad, version + 1)
    assert any(problem.path.startswith("classes[0]") for problem in invalid.value)
    assert drafts.get().version == version + 1 and AuditEntry.objects.count() == 1


def test_apply_queues_the_draft_at_its_version(actor):
    draft = services.replace_draft(actor, ZONES, None)
    with pytest.raises(ServiceError) as stale:
        services.apply_draft(actor, draft.version - 1, 120)
    assert stale.value.code == Refusal.STALE and not Job.objects.exists()
    queued = services.apply_draft(actor, draft.version, 120)
    job = Job.objects.get(pk=queued.job)
    assert (queued.kind, job.kind, job.args["timeout"], job.args["draft_version"]) == \
        ("policy.apply", "policy.apply", 120, draft.version)
    assert "inside" in job.args["policy_text"]
    assert AuditEntry.objects.filter(action="policy apply", address="192.0.2.7").exists()


def test_a_revision_that_does_not_exist_is_not_found_by_every_operation(actor):
    for operation in (lambda: kit.rollback(POLICY, actor, 41),
                      lambda: kit.compare(POLICY, 41),
                      lambda: services.draft_from_revision(actor, 41),
                      lambda: kit.rollback(HA, actor, 1)):
        with pytest.raises(ServiceError) as missing:
            operation()
        assert missing.value.code == Refusal.NOT_FOUND
    assert not Job.objects.exists() and not AuditEntry.objects.exists()


def test_only_a_master_fails_over(actor):
    with pytest.raises(ServiceError) as refused:
        ha_services.fail_over(actor, "BACKUP")
    assert refused.value.code == Refusal.CONFLICT and not Job.objects.exists()
    assert ha_services.fail_over(actor, "MASTER").kind == "ha.failover"


def test_the_decisions_and_the_history_are_the_kits_for_every_domain(actor):
    assert kit.confirm(HA, actor).kind == "ha.confirm"
    assert kit.cancel(POLICY, actor).kind == "policy.cancel"
    assert kit.history(POLICY) == []
    assert [entry.action for entry in AuditEntry.objects.order_by("pk")] == \
        ["ha confirm", "policy roll back"]


def test_a_confirm_that_moves_the_management_address_must_say_where_it_arrived(actor):
    NetworkState.objects.create(pk=1, confirmed=1, pending=2, confirm_over=["192.0.2.9"])
    with pytest.raises(ServiceError) as refused:
        network_services.confirm(actor, None)
    assert refused.value.code == Refusal.CONFLICT and refused.value.path == "arrived_at"
    assert not Job.objects.exists()
    queued = network_services.confirm(actor, "192.0.2.9")
    job = Job.objects.get(pk=queued.job)
    assert (job.kind, job.args) == ("network.confirm", {"arrived_at": "192.0.2.9",
                                                        "token": None})
