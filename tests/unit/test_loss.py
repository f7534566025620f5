"""The loss path's parsers and summary (dashboard/loss.py), on the text the tools and
/proc give, and on values a forged row could hold. Plain Python."""
import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from dashboard import loss

T0 = datetime(2026, 11, 29, tzinfo=timezone.utc)


def link(name, rx=None, tx=None, kind="ether"):
    return {"ifname": name, "link_type": kind, "stats64": {"rx": rx or {}, "tx": tx or {}}}


def test_links_give_the_nics_counters_per_interface():
    text = json.dumps([
        link("lo", {"dropped": 5}, kind="loopback"),
        link("eth1", {"bytes": 9, "dropped": 3, "over_errors": 1, "crc_errors": 2,
                      "fifo_errors": 4, "missed_errors": 17}, {"dropped": 6}),
        link("eth2", {"missed_errors": "17", "crc_errors": True, "dropped": -1}),
    ])
    assert loss.from_links(text) == {
        "nic.rx_crc@eth1": 2, "nic.rx_missed@eth1": 17, "nic.rx_fifo@eth1": 4,
        "nic.rx_over@eth1": 1, "nic.rx_dropped@eth1": 3, "nic.tx_dropped@eth1": 6}
    assert loss.from_links("not json") == {} and loss.from_links('{"a": 1}') == {}


def test_qdiscs_count_each_interfaces_root_once():
    text = json.dumps([
        {"kind": "mq", "handle": "0:", "dev": "eth1", "root": True, "drops": 12},
        {"kind": "fq_codel", "handle": "0:", "dev": "eth1", "parent": ":1", "drops": 5},
        {"kind": "fq_codel", "handle": "0:", "dev": "eth1", "parent": ":2", "drops": 7},
        {"kind": "tbf", "handle": "8001:", "dev": "eth2", "root": True, "drops": 3},
        {"kind": "noqueue", "dev": "lo", "root": True, "drops": 0},
        {"kind": "pfifo", "dev": "eth3", "root": True, "drops": "many"},
    ])
    assert loss.from_qdiscs(text) == {"qdisc.drops@eth1": 12, "qdisc.drops@eth2": 3,
                                      "qdisc.drops@lo": 0}


def test_softnet_sums_its_cpus():
    text = ("00008640 00000002 0000000a 00000000 00000000 00000000 00000000 00000000 "
            "00000000 00000001 00000000 00000000 00000000\n"
            "0001305b 00000001 00000001 00000000 00000000 00000000 00000000 00000000 "
            "00000000 00000003 00000000 00000000 00000001\n")
    assert loss.from_softnet(text) == {"softnet.dropped": 3, "softnet.time_squeeze": 11,
                                       "softnet.flow_limit": 4}
    # an old kernel's shorter lines: no flow limit column
    assert loss.from_softnet("00000001 00000002 00000003\n") == {
        "softnet.dropped": 2, "softnet.time_squeeze": 3}


def test_conntrack_statistics_by_the_headers_names():
    text = ("entries  clashres found new invalid ignore delete chainlength insert "
            "insert_failed drop early_drop icmp_error  expect_new\n"
            "00000010  00000000 00000000 00000000 00000002 00000000 00000000 00000000 "
            "00000000 00000001 00000000 00000004 00000000  00000000\n"
            "00000010  00000000 00000000 00000000 00000003 00000000 00000000 00000000 "
            "00000000 00000000 00000005 00000000 00000000  00000000\n")
    assert loss.from_conntrack(text) == {"conntrack.invalid": 5, "conntrack.insert_failed": 1,
                                         "conntrack.drop": 5, "conntrack.early_drop": 4}
    assert loss.from_conntrack("") == {}


def test_seqadj_drops():
    assert loss.from_seqadj({"icmp_quotes_dropped": 2, "seqrand_dropped_nomem": 1,
                             "sack_blocks_translated": 50}) == {
        "seqadj.icmp_quotes_dropped": 2, "seqrand.dropped_nomem": 1}
    assert loss.from_seqadj(None) == {}


def test_a_key_names_a_stage_and_an_interface_only_where_it_has_one():
    assert loss.split("nic.rx_missed@eth1")[1] == "eth1"
    assert loss.split("softnet.dropped")[1] == ""
    for bad in ("softnet.dropped@eth1", "nic.rx_missed", "bogus", "qdisc.drops@"):
        assert loss.split(bad) is None, bad


@dataclass
class Row:
    taken: datetime
    loss: object


def test_the_summary_has_rate_total_last_increase_and_alarm():
    samples = [Row(T0, {"softnet.dropped": 5, "nic.rx_missed@eth1": 0,
                        "softnet.time_squeeze": 1, "conntrack.drop": 1}),
               Row(T0 + timedelta(seconds=10), {"softnet.dropped": 5, "nic.rx_missed@eth1": 20,
                                                "softnet.time_squeeze": 9, "conntrack.drop": 1}),
               Row(T0 + timedelta(seconds=20), None),                # before the loss path
               Row(T0 + timedelta(seconds=30), {"softnet.dropped": 5, "nic.rx_missed@eth1": 60,
                                                "softnet.time_squeeze": 9, "conntrack.drop": 0,
                                                "bogus": 4, "softnet.flow_limit": "x"})]
    rows = {row.key: row for row in loss.summary(samples, T0 + timedelta(seconds=40))}
    assert list(rows) == ["nic.rx_missed@eth1", "softnet.dropped", "softnet.time_squeeze",
                          "conntrack.drop"]
    missed = rows["nic.rx_missed@eth1"]
    assert (missed.total, missed.rate, missed.last_increase, missed.alarm) == (
        60, 2.0, T0 + timedelta(seconds=30), True)
    dropped = rows["softnet.dropped"]
    assert (dropped.rate, dropped.last_increase, dropped.alarm) == (0.0, None, False)
    # grew, but need not stay at zero: no alarm
    squeeze = rows["softnet.time_squeeze"]
    assert (squeeze.last_increase, squeeze.alarm) == (T0 + timedelta(seconds=10), False)
    # started again from zero (a module reloaded): no rate, no increase
    assert (rows["conntrack.drop"].rate, rows["conntrack.drop"].alarm) == (None, False)
    # long after the increase: no alarm
    later = loss.summary(samples, T0 + timedelta(seconds=30 + loss.RECENT + 1))
    assert not any(row.alarm for row in later)
    assert loss.summary([], T0) == [] and loss.summary([Row(T0, ["x"])], T0) == []


def test_grown_names_the_stages_that_should_stay_at_zero_and_did_not():
    before = {"nic.rx_missed@eth1": 5, "softnet.time_squeeze": 1, "qdisc.drops@eth2": 0,
              "conntrack.drop": 3}
    after = {"nic.rx_missed@eth1": 9, "softnet.time_squeeze": 50, "qdisc.drops@eth2": 2,
             "conntrack.drop": 3, "softnet.dropped": 4, "bogus@x": 9}
    assert [(s.key, i, n) for s, i, n in loss.grown(before, after)] == [
        ("nic.rx_missed", "eth1", 4), ("qdisc.drops", "eth2", 2)]
    assert loss.grown(None, after) == [] and loss.grown(before, "x") == []
