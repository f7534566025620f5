"""The IDS hook's set elements (flows/core/hook.py) read back by nftables itself:
whatever a caller sends - valid prefixes and connections, and the same with trouble
before or after, or nothing but trouble - either the hook's check refuses it naming the
field, or the element nft takes into the set, listed back by `nft -j`, is exactly the
match that was meant (its prefix; its addresses, protocol and ports), with its timeout.
The table itself passes `nft -c` with and without its flowtable."""
import ipaddress
import json
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_daemon_files_property import EXAMPLES, IPV4, IPV6, poisoned

from flows.core import hook
from tusklib.names import BRIDGE_FAMILY, FAMILY, HOOK_TABLE
from tusklib.values import InterfaceName


def nft(netns, *argv, stdin=None):
    return subprocess.run(["ip", "netns", "exec", netns, "nft", *argv], input=stdin,
                          capture_output=True, text=True)


@pytest.fixture(scope="module")
def hooked(scratch_netns):
    """The hook's table in the scratch namespace (without a flowtable: the host kernel
    has none); emptied of entries between examples by the test itself."""
    for family in (FAMILY, BRIDGE_FAMILY):
        nft(scratch_netns, "delete", "table", family, HOOK_TABLE)
    loaded = nft(scratch_netns, "-f", "-", stdin=hook.render() + hook.render_bridge())
    assert loaded.returncode == 0, loaded.stderr
    yield scratch_netns
    for family in (FAMILY, BRIDGE_FAMILY):
        nft(scratch_netns, "delete", "table", family, HOOK_TABLE)


def test_the_table_passes_nft_check_with_and_without_its_flowtable(nft_check):
    for devices in (None, [], [InterfaceName("eth1"), InterfaceName("veth-s.100")]):
        checked = nft_check(hook.render(devices))
        # a flowtable needs the kernel's flowtable support: the host's has none
        if devices is not None and "flowtable" in checked.stderr.lower() and \
                checked.returncode:
            continue
        assert checked.returncode == 0, (devices, checked.stderr)


def prefixes():
    def of(address, length):
        return str(ipaddress.ip_network(f"{address}/{length}", strict=False))
    return st.one_of(st.tuples(IPV4, st.integers(0, 32)).map(lambda t: of(*t)),
                     st.tuples(IPV6, st.integers(0, 128)).map(lambda t: of(*t)))


def flows():
    pair = st.one_of(st.tuples(IPV4, IPV4), st.tuples(IPV6, IPV6))
    return st.builds(lambda ends, protocol, sport, dport: {
        "src": ends[0], "dst": ends[1], "protocol": protocol, "sport": sport, "dport": dport},
        pair, st.sampled_from(list(hook.PROTOCOLS)), st.integers(1, 65535),
        st.integers(1, 65535))


def poisoned_flows():
    return st.one_of(flows(), flows().flatmap(lambda flow: st.builds(
        lambda key, bad: {**flow, key: bad}, st.sampled_from(list(flow)),
        poisoned(st.just("10.0.0.1")))))


@EXAMPLES
@given(match=st.one_of(poisoned(prefixes()).map(lambda p: {"prefix": p}),
                       poisoned_flows().map(lambda f: {"flow": f})),
       action=st.sampled_from(hook.ACTIONS), ttl=st.integers(1, 3600))
def test_what_the_check_takes_nft_holds_exactly(hooked, match, action, ttl):
    try:
        request = hook.request_of({"action": action, "ttl": ttl, **match})
    except hook.HookError as refused:
        assert all(p.path.startswith(("prefix", "flow")) for p in refused.problems)
        return
    added = nft(hooked, "-f", "-", stdin=hook.element(request))
    assert added.returncode == 0, (hook.element(request), added.stderr)
    families = (FAMILY, BRIDGE_FAMILY) if action == "block" else (FAMILY,)
    listed = [nft(hooked, "-j", "list", "set", family, HOOK_TABLE, request.set_name)
              for family in families]
    for family in families:
        nft(hooked, "flush", "set", family, HOOK_TABLE, request.set_name)
    bridged = [hook.entries(found.stdout) for found in listed[1:]]
    found = hook.entries(listed[0].stdout)
    # a block holds the same key in the bridges' table
    assert all([e["key"] for e in other] == [e["key"] for e in found] for other in bridged)
    assert len(found) == 1, found
    if request.prefix:
        network = request.prefix.network
        expected = (str(network.network_address) if network.prefixlen == network.max_prefixlen
                    else str(network))
        assert found[0]["key"] in (expected, str(network))
    else:
        flow = request.flow.as_dict()
        assert found[0]["key"] == [flow["src"], flow["dst"], flow["protocol"], flow["sport"],
                                   flow["dport"]]
    assert 0 <= found[0]["expires"] <= ttl


def test_a_full_set_refuses_the_next_entry(hooked):
    """SIZE bounds a set: the kernel refuses past it (the job fails saying so)."""
    small = hook.render().replace(f"size {hook.SIZE};", "size 2;")
    nft(hooked, "delete", "table", FAMILY, HOOK_TABLE)
    assert nft(hooked, "-f", "-", stdin=small).returncode == 0
    try:
        for number, ok in ((1, True), (2, True), (3, False)):
            request = hook.request_of({"action": "block", "prefix": f"192.0.2.{number}/32"})
            added = nft(hooked, "-f", "-", stdin=hook.element(request))
            assert (added.returncode == 0) == ok, added.stderr
    finally:
        nft(hooked, "delete", "table", FAMILY, HOOK_TABLE)
        nft(hooked, "-f", "-", stdin=hook.render())


def test_entries_of_a_forged_or_missing_listing_are_none():
    assert hook.entries("") == [] and hook.entries("{}") == []
    assert hook.entries(json.dumps({"nftables": [{"set": {"elem": "x"}}]})) == []
