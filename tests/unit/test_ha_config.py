"""ha.toml -> the model, every problem at once and each naming its field; the model ->
keepalived.conf and conntrackd.conf, the same bytes for the same document
(webui/ha/core/). The daemons running what is rendered: netns/test_ha_pair.py."""
import copy
import json

import pytest

from ha.core import config, render, status
from ha.core.config import Code, HaError

GOOD = {"ha": {"enabled": True, "role": "primary", "vrid": 51, "advert_ms": 100,
               "preempt": False, "sync_interface": "ens6",
               "sync_address": "192.168.255.1/30", "peer_address": "192.168.255.2"},
        "virtual": [{"interface": "ens4.100",
                     "addresses": ["198.51.100.1/24", "2001:db8:100::1/64"]},
                    {"interface": "bond0", "addresses": ["203.0.113.1/24"]}]}


def changed(path, value):
    document = copy.deepcopy(GOOD)
    where = document
    for key in path[:-1]:
        where = where[key]
    if value is KeyError:
        del where[path[-1]]
    else:
        where[path[-1]] = value
    return document


def problems(document):
    with pytest.raises(HaError) as raised:
        config.from_document(document)
    return {(p.path, p.code): p.message for p in raised.value.problems}


def test_a_good_document_gives_the_model():
    model = config.from_document(GOOD)
    assert model.priority == 200 and model.sync_ip == "192.168.255.1" and model.family == 4
    assert [v.interface for v in model.virtual] == ["ens4.100", "bond0"]
    assert config.from_document(changed(("ha", "role"), "secondary")).priority == 100


@pytest.mark.parametrize("path, value, where, code, reason", [
    (("ha", "vrid"), 0, "ha.vrid", Code.VALUE, "from 1 to 255"),
    (("ha", "vrid"), "51", "ha.vrid", Code.SCHEMA, "expected an integer, got a string"),
    (("ha", "role"), "boss", "ha.role", Code.VALUE, "must be primary or secondary"),
    (("ha", "advert_ms"), 105, "ha.advert_ms", Code.VALUE, "in steps of 10"),
    (("ha", "advert_ms"), 50000, "ha.advert_ms", Code.VALUE, "10 to 40950 ms"),
    (("ha", "sync_interface"), "a/b", "ha.sync_interface", Code.VALUE, "contains '/'"),
    (("ha", "sync_address"), "192.168.255.1", "ha.sync_address", Code.VALUE,
     "no prefix length"),
    (("ha", "peer_address"), "192.168.9.2", "ha.peer_address", Code.VALUE,
     "not on the sync link's subnet 192.168.255.0/30"),
    (("ha", "peer_address"), "192.168.255.1", "ha.peer_address", Code.VALUE,
     "this box's own sync address"),
    (("ha", "peer_address"), "fd00::2", "ha.peer_address", Code.VALUE, "one family"),
    (("ha", "peer_address"), KeyError, "ha.peer_address", Code.SCHEMA, "missing"),
    (("ha", "colour"), "red", "ha.colour", Code.SCHEMA, "unknown key"),
    (("virtual", 1, "interface"), "ens6", "virtual[1].interface", Code.VALUE,
     "is the sync link"),
    (("virtual", 1, "interface"), "ens4.100", "virtual[1].interface", Code.VALUE,
     "is virtual[0] already"),
    (("virtual", 1, "addresses"), ["198.51.100.1/24"], "virtual[1].addresses[0]", Code.VALUE,
     "198.51.100.1 is virtual[0].addresses[0] already"),
    (("virtual", 1, "addresses"), ["fe80::1/64"], "virtual[1].addresses[0]", Code.VALUE,
     "link-local"),
    (("virtual", 1, "addresses"), ["192.168.255.2/24"], "virtual[1].addresses[0]",
     Code.VALUE, "on the sync link's subnet"),
    (("virtual", 1, "addresses"), [], "virtual[1].addresses", Code.VALUE,
     "at least one address"),
    (("virtual",), [], "virtual", Code.VALUE, "nothing for the pair to fail over"),
])
def test_a_bad_value_is_named_with_the_reason(path, value, where, code, reason):
    found = problems(changed(path, value))
    assert (where, code) in found, found
    assert reason in found[(where, code)], found


def test_every_problem_is_reported_at_once():
    document = changed(("ha", "vrid"), 300)
    document["ha"]["advert_ms"] = 3
    document["virtual"][0]["addresses"] = ["not an address"]
    assert {path for path, _ in problems(document)} == {
        "ha.vrid", "ha.advert_ms", "virtual[0].addresses[0]"}


def test_text_that_is_not_toml_or_too_long_is_refused():
    with pytest.raises(HaError) as raised:
        config.parse("[ha\n")
    assert raised.value.code == Code.SYNTAX and "not valid TOML" in str(raised.value)
    with pytest.raises(HaError) as raised:
        config.parse("#" * (config.TEXT_MAX + 1))
    assert raised.value.code == Code.SYNTAX


def test_keepalived_gets_one_instance_per_segment_and_family_in_one_sync_group():
    text = render.keepalived_conf(config.from_document(GOOD))
    assert text == render.keepalived_conf(config.from_document(copy.deepcopy(GOOD)))
    group = text.split("vrrp_sync_group tusk {")[1].split("\n}")[0]
    assert group.split()[2:5] == ["tusk_ens4_100_v4", "tusk_ens4_100_v6", "tusk_bond0_v4"]
    # the role changes go in order through one FIFO to one notify process, not to a
    # notify per event (those run concurrently and may finish out of order)
    assert "notify" not in group
    assert 'notify_fifo_script "/usr/lib/tusk/ha-notify /run/tusk/ha ' \
        '/run/tusk/ha/conntrackd.conf"' in text and "notify_fifo /run/tusk/ha/notify.fifo" in text
    assert text.count("vrrp_instance ") == 3 and text.count("state BACKUP") == 3
    assert "advert_int 0.1\n" in text and text.count("nopreempt") == 3
    assert "2001:db8:100::1/64 dev ens4.100" in text and "vrrp_version 3" in text
    preempting = render.keepalived_conf(config.from_document(changed(("ha", "preempt"), True)))
    assert "nopreempt" not in preempting
    assert render.advert_seconds(1000) == "1" and render.advert_seconds(2550) == "2.55"


def test_conntrackd_syncs_every_state_without_an_external_cache():
    text = render.conntrackd_conf(config.from_document(GOOD), local_addresses=["10.9.0.5/24"])
    for line in ("DisableExternalCache on", "NetlinkEventsReliable on",
                 "IPv4_address 192.168.255.1", "IPv4_Destination_Address 192.168.255.2",
                 "Interface ens6", "TCPWindowTracking no", "Path /run/tusk/ha/conntrackd.ctl"):
        assert f"\t{line}\n" in text, line
    assert "State" not in text          # a state filter drops the offsets' SYN-time events
    ignored = text.split("Address Ignore {")[1].split("}")[0].split()
    assert ignored == ["IPv4_address", "10.9.0.5", "IPv4_address", "127.0.0.1",
                       "IPv4_address", "192.168.255.1", "IPv4_address", "198.51.100.1",
                       "IPv4_address", "203.0.113.1", "IPv6_address", "::1",
                       "IPv6_address", "2001:db8:100::1"]


# conntrackd 1.4.7's `conntrackd -s` of a backup, from netns/test_ha_pair.py
REPORT = """cache internal:
current active connections:\t           1
connections created:\t\t           1\tfailed:\t           0
connections updated:\t\t           0\tfailed:\t           0
connections destroyed:\t\t           0\tfailed:\t           0

external inject:
connections created:\t\t           1\tfailed:\t           2
connections updated:\t\t           1\tfailed:\t           0
connections destroyed:\t\t           0\tfailed:\t           0

traffic processed:
                   0 Bytes                         0 Pckts

UDP traffic (active device=sync0):
                 172 Bytes sent                  184 Bytes recv
                   7 Pckts sent                    6 Pckts recv
                   0 Error send                    3 Error recv

message tracking:
                   0 Malformed msgs                    5 Lost msgs
"""


def test_conntrackds_report_gives_the_numbers_the_page_shows():
    report = status.conntrackd_stats(REPORT)
    assert report["udp_traffic"]["bytes_sent"] == 172
    assert report["external_inject"]["connections_created_failed"] == 2
    assert status.sync_health(report) == {
        "entries": 1, "injected": 2, "inject_failures": 2, "lost": 5, "malformed": 0,
        "send_errors": 0, "recv_errors": 3}
    with pytest.raises(ValueError):
        status.conntrackd_stats("connect: No such file or directory\n")


def test_the_role_is_what_the_notify_recorded(tmp_path):
    assert status.role(tmp_path) is None
    (tmp_path / "state").write_text("BACKUP\n")
    assert status.role(tmp_path) == "BACKUP"
    (tmp_path / "state").write_text("rm -rf /\n")
    assert status.role(tmp_path) is None


def test_the_text_the_page_writes_parses_back_to_the_same_model():
    model = config.from_document(GOOD)
    text = config.to_toml(model)
    assert config.parse(text) == model
    assert config.to_document(model) == GOOD
    assert config.to_toml(config.parse(text)) == text
    assert text.startswith("# Tusk's high availability")


def test_interfaces_the_box_lacks_are_named():
    found = config.interfaces_problems(config.from_document(GOOD), {"ens6", "bond0", "lo"})
    assert [(p.path, p.code) for p in found] == [("virtual[0].interface", Code.VALUE)]
    assert found[0].message.startswith("ens4.100: no such interface on this box (it has bond0")


def test_the_boot_writes_both_daemons_files_only_for_an_enabled_pair(tmp_path):
    """tusk-boot ha (tusk-ha.service): the files the daemons' units wait for, the
    stale lock gone, strict TCP tracking; nothing without a usable pair."""
    import os
    import stat

    from appliance import boot
    ha, network, run, loose = boot_files(tmp_path)
    (run / "conntrackd.lock").write_text("")                 # a killed conntrackd's
    ha.write_text(render_toml(GOOD))
    assert boot.write_ha(ha, network, run, loose) == 0
    assert sorted(os.listdir(run)) == ["conntrackd.conf", "keepalived.conf"]
    assert stat.S_IMODE((run / "conntrackd.conf").stat().st_mode) == 0o600
    assert "IPv4_address 10.9.0.5" in (run / "conntrackd.conf").read_text()
    assert f"{run}/conntrackd.conf" in (run / "keepalived.conf").read_text()
    assert loose.read_text() == "0\n"
    for text in (render_toml(GOOD).replace("enabled = true", "enabled = false"),
                 render_toml(GOOD).replace("vrid = 51", "vrid = 0")):
        ha.write_text(text)
        loose.write_text("1\n")
        assert boot.write_ha(ha, network, run, loose) == 0
        assert os.listdir(run) == [] and loose.read_text() == "1\n"
    ha.unlink()
    assert boot.write_ha(ha, network, run, loose) == 0 and os.listdir(run) == []


def boot_files(tmp_path):
    """tusk-boot ha's files in tmp_path: ha.toml (to write), a network.toml with the
    management address 10.9.0.5, the run directory, nf_conntrack_tcp_loose at 1."""
    ha, network, run, loose = (tmp_path / "ha.toml", tmp_path / "network.toml",
                               tmp_path / "run", tmp_path / "tcp_loose")
    network.write_text('version = 2\n[[interfaces]]\nname = "ens3"\nrole = "management"\n'
                       'addresses = ["10.9.0.5/24"]\n')
    loose.write_text("1\n")
    run.mkdir()
    return ha, network, run, loose


def render_toml(document):
    """GOOD as ha.toml's text."""
    def value(v):
        return "true" if v is True else "false" if v is False else json.dumps(v)

    lines = ["[ha]"] + [f"{key} = {value(v)}" for key, v in document["ha"].items()]
    for segment in document["virtual"]:
        lines += ["[[virtual]]"] + [f"{key} = {value(v)}" for key, v in segment.items()]
    return "\n".join(lines) + "\n"


CLUSTER = {"ha": {"enabled": True, "mode": "cluster", "sync_interface": "sync0",
                  "sync_address": "192.168.255.3/24"}, "virtual": []}


def test_a_clusters_box_has_only_its_sync_link():
    """Issue 39, docs/SCALE.md: a box of a cluster sharing the load - no role, no VRRP, no
    peer, no virtual addresses - round-trips through ha.toml's text."""
    model = config.from_document(CLUSTER)
    assert model.cluster and model.role is None and model.peer_address is None
    assert model.virtual == () and model.sync_ip == "192.168.255.3"
    text = config.to_toml(model)
    assert 'mode = "cluster"' in text and "role" not in text and "[[virtual]]" not in text
    assert config.parse(text) == model and config.to_document(model) == CLUSTER
    assert not config.from_document(GOOD).cluster          # a pair without a mode


@pytest.mark.parametrize(("key", "value", "why"), [
    ("role", "primary", "none is primary"), ("vrid", 51, "no VRRP"),
    ("advert_ms", 100, "BFD"), ("preempt", False, "no addresses"),
    ("peer_address", "192.168.255.2", "no one peer")])
def test_a_clusters_box_refuses_the_pairs_keys_each_saying_why(key, value, why):
    document = copy.deepcopy(CLUSTER)
    document["ha"][key] = value
    found = problems(document)
    assert list(found) == [(f"ha.{key}", Code.SCHEMA)]
    assert why in found[(f"ha.{key}", Code.SCHEMA)] and 'mode = "pair"' in \
        found[(f"ha.{key}", Code.SCHEMA)]


def test_a_cluster_refuses_virtual_addresses_an_ipv6_sync_link_and_unknown_modes():
    document = copy.deepcopy(CLUSTER)
    document["virtual"] = copy.deepcopy(GOOD["virtual"])
    assert list(problems(document)) == [("virtual", Code.SCHEMA)]
    document = copy.deepcopy(CLUSTER)
    document["ha"]["sync_address"] = "fd00::3/64"
    found = problems(document)
    assert list(found) == [("ha.sync_address", Code.VALUE)] and \
        "IPv4" in found[("ha.sync_address", Code.VALUE)]
    document["ha"].pop("sync_address")
    assert list(problems(document)) == [("ha.sync_address", Code.SCHEMA)]
    for mode, code in (("cloud", Code.VALUE), (3, Code.SCHEMA)):
        document = copy.deepcopy(CLUSTER)
        document["ha"]["mode"] = mode
        assert ("ha.mode", code) in problems(document)
    document = copy.deepcopy(GOOD)
    document["ha"]["mode"] = "pair"          # said out loud: the same pair
    assert config.from_document(document) == config.from_document(GOOD)


def test_the_boot_writes_only_conntrackds_file_for_a_clusters_box(tmp_path):
    """tusk-boot ha: a cluster's box runs conntrackd alone (tusk-keepalived's condition,
    its keepalived.conf, is not met), multicasting on the sync link; strict TCP tracking."""
    import os

    from appliance import boot
    ha, network, run, loose = boot_files(tmp_path)
    (run / "keepalived.conf").write_text("")        # a pair's, before the box joined
    ha.write_text(config.to_toml(config.from_document(CLUSTER)))
    assert boot.write_ha(ha, network, run, loose) == 0
    assert sorted(os.listdir(run)) == ["conntrackd.conf"]
    text = (run / "conntrackd.conf").read_text()
    assert "Mode NOTRACK" in text and "IPv4_address 239.255.37.80" in text
    assert "IPv4_address 10.9.0.5" in text and loose.read_text() == "0\n"
