"""The IDS hook's request check (flows/core/hook.py): every bad field named at once, one
match exactly, typed values only; and the element text for each kind of match."""
import pytest

from flows.core import hook


def test_a_request_is_checked_whole():
    with pytest.raises(hook.HookError) as refused:
        hook.request_of({"action": "allow", "flow": {"src": "10.0.0.1", "dst": "::1",
                                                     "protocol": "icmp", "sport": 0,
                                                     "dport": 80, "x": 1},
                         "ttl": 0, "reason": "a\nb", "extra": True})
    assert {p.path for p in refused.value.problems} == {
        "extra", "action", "flow.x", "flow.protocol", "flow.sport", "flow.dst", "ttl",
        "reason"}
    with pytest.raises(hook.HookError) as both:
        hook.request_of({"action": "block", "prefix": "10.0.0.0/8",
                         "flow": {"src": "10.0.0.1"}})
    assert both.value.problems[0].path == ""
    with pytest.raises(hook.HookError) as host_bits:
        hook.request_of({"action": "block", "prefix": "10.0.0.1/8"})
    assert "host bits" in host_bits.value.problems[0].message
    with pytest.raises(hook.HookError):
        hook.request_of({"action": "block", "prefix": "fe80::1%eth0/128"})


def test_elements_name_the_set_of_their_family_and_kind():
    block = hook.request_of({"action": "block", "prefix": "2001:db8::/32", "ttl": 30})
    assert hook.element(block) == (
        "add element inet tusk_hook block_net6 { 2001:db8::/32 timeout 30s }\n"
        "add element bridge tusk_hook block_net6 { 2001:db8::/32 timeout 30s }\n")
    bypass = hook.request_of({"action": "bypass", "reason": "globus transfer", "flow": {
        "src": "10.0.0.1", "dst": "10.0.9.9", "protocol": "tcp", "sport": 50000,
        "dport": 2811}})
    assert hook.element(bypass) == ("add element inet tusk_hook bypass_flow4 "
                                    "{ 10.0.0.1 . 10.0.9.9 . 6 . 50000 . 2811 timeout 600s }\n")
    assert str(bypass) == "bypass tcp 10.0.0.1:50000 -> 10.0.9.9:2811"
    assert bypass.as_dict()["flow"]["protocol"] == "tcp"
