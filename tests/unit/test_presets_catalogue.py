"""The service presets (policy/core/presets.py, issue 40): every preset makes services
and a class the policy engine takes, all of them at once too; a preset's services
already in a draft are used, not added twice. Plain Python; the page is
tests/web/test_policy_presets.py."""
import pytest

from policy.core import presets
from policy.core.errors import PolicyError
from policy.core.normalise import fastpath_in_effect, load_policy

ZONES = {"version": 1, "zones": [{"name": "inside", "interfaces": ["eth1"]},
                                 {"name": "outside", "interfaces": ["eth2"]}]}


@pytest.mark.parametrize("preset", presets.PRESETS, ids=[p.key for p in presets.PRESETS])
def test_each_preset_makes_a_policy_the_engine_takes(preset):
    document, added = presets.add_to(ZONES, preset, "copy", "inside", "outside")
    policy = load_policy(document)
    assert [s.name for s in policy.services] == [s["name"] for s in preset.services]
    [cls] = policy.classes
    assert (cls.from_zone, cls.to_zone, cls.action) == ("inside", "outside", "accept")
    # an elephant's defaults: nothing stripped, no clamp, the fast path by itself
    assert cls.tcp_profile() is None and not cls.tcp_options.stripped(), cls
    assert fastpath_in_effect(cls, policy) == "auto", cls
    assert preset.source and added[-1] == "class copy"


def test_every_preset_together_and_twice_has_no_clash_and_no_service_twice():
    document = ZONES
    for preset in presets.PRESETS:
        document, added = presets.add_to(document, preset, preset.key, "inside", "outside")
        assert added[-1] == f"class {preset.key}"
    for preset in presets.PRESETS:          # again: its services are there already
        document, added = presets.add_to(document, preset)
        assert added == []
    policy = load_policy(document)
    assert len(policy.classes) == len(presets.PRESETS)
    contents = [(s.protocol, s.ports) for s in policy.services]
    assert len(contents) == len(set(contents))
    # a preset whose service another preset has already (S3's HTTPS, Globus's) uses it
    s3 = next(c for c in policy.classes if c.name == "s3")
    assert s3.services == ("globus-https",)
    gridftp = next(c for c in policy.classes if c.name == "gridftp")
    assert gridftp.services == ("gridftp", "globus-data")


def test_a_service_of_the_same_ports_under_another_name_is_used():
    document = {**ZONES, "services": [{"name": "web", "protocol": "tcp", "ports": [443]}]}
    changed, added = presets.add_to(document, presets.BY_KEY["s3"], "objects", "inside")
    assert added == ["class objects"] and changed["services"] == document["services"]
    assert changed["classes"][-1]["services"] == ["web"]


def test_a_service_of_the_same_name_and_other_ports_is_refused_by_the_engine():
    document = {**ZONES, "services": [{"name": "ssh", "protocol": "tcp", "ports": [2222]}]}
    changed, added = presets.add_to(document, presets.BY_KEY["ssh"])
    assert added == ["service ssh"] and document["services"] == [
        {"name": "ssh", "protocol": "tcp", "ports": [2222]}]    # the input is left alone
    with pytest.raises(PolicyError) as refused:
        load_policy(changed)
    assert [p.path for p in refused.value.problems] == ["services[1].name"]


def test_globus_has_the_data_channels_its_documentation_gives():
    globus = presets.BY_KEY["globus"]
    assert {s["name"]: s["ports"] for s in globus.services} == {
        "globus-https": [443], "globus-data": ["50000-51000"]}
    assert globus.both_ways and "docs.globus.org" in globus.source
