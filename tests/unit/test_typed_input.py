"""Names are matched whole (issue 34): a pattern ending in `$` with re.match also takes
the text with one line break after it, so "inside\n" once passed as a zone's name and
"eth1\n" as an interface until nft -c (or the kernel) refused what they became. And a
number field's `isdigit()` is true of "²" and "٣", which int() then refuses with a
ValueError: each check that takes typed input asks for ASCII digits. Plain Python."""
import re

import pytest

from diag.core import capture
from policy.core.errors import Code, PolicyError
from policy.core.normalise import load_policy
from selftest.core import control, responder
from tusklib.names import IFNAME_PATTERN, NAME_PATTERN


@pytest.mark.parametrize("name", ["inside\n", "inside\r\n", "\ninside", "in\nside"])
def test_a_name_with_a_line_break_is_no_name(name):
    with pytest.raises(PolicyError) as caught:
        load_policy({"zones": [{"name": name, "interfaces": ["eth1"]}]})
    assert [(p.code, p.path) for p in caught.value.problems] == [(Code.SCHEMA, "zones[0].name")]
    assert "is not a valid name" in caught.value.message


@pytest.mark.parametrize("ifname", ["eth1\n", "eth1\r\n", "\neth1"])
def test_an_interface_with_a_line_break_is_no_interface(ifname):
    with pytest.raises(PolicyError) as caught:
        load_policy({"zones": [{"name": "inside", "interfaces": [ifname]}]})
    assert [(p.code, p.path) for p in caught.value.problems] == [
        (Code.SCHEMA, "zones[0].interfaces[0]")]


def test_the_shared_patterns_match_only_whole_text():
    assert re.fullmatch(NAME_PATTERN, "inside") and re.fullmatch(IFNAME_PATTERN, "eth1")
    for pattern, text in ((NAME_PATTERN, "inside\n"), (IFNAME_PATTERN, "eth1\n")):
        assert not re.match(pattern, text) and not re.search(pattern, text)


def test_a_capture_interface_with_a_line_break_is_refused():
    with pytest.raises(capture.SpecError) as caught:
        capture.validate(capture.Spec(interfaces=("eth1\n",)))
    assert str(caught.value) == "error[INTERFACE]: interfaces: 'eth1\\n' is not an interface name"


@pytest.mark.parametrize("text", ["²", "٣", "1²", "9" * 5000])
def test_the_responder_refuses_a_number_that_is_not_ascii_digits(text):
    with pytest.raises(responder.Refused, match="must be 1..10"):
        responder._number(text, "count", 10)


@pytest.mark.parametrize("text", ["host:²", "host:٣٣", "[::1]:8" + "0" * 5000])
def test_a_host_and_port_with_other_digits_is_refused(text):
    with pytest.raises(control.ParamError):
        control.split_host_port(text)
