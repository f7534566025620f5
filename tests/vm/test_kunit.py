"""The KUnit tests of kernel-patches/ (NF_CONNTRACK_SEQADJ_KUNIT_TEST,
NF_CT_NETLINK_KUNIT_TEST), run by the test kernel at boot with kunit.enable=1: every
case of each suite must pass, and the kernel must report nothing wrong while they run
(a case that provokes a warning is a bug to bots and to panic_on_warn)."""
import re

import pytest
from vm import KERNEL_TROUBLE

# suite -> the fewest cases it has
SUITES = {"nf_conntrack_seqadj": 10, "nf_conntrack_netlink": 1}


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_kunit_suite_passes(kunit_log, suite):
    """The suite's block of the KTAP log: its cases (one indent: a parameterised case's
    own results are nested deeper), each ok, and the suite's line ok. (KUnit prints a
    "pass: fail:" summary only for a suite of more than one case.)"""
    block = re.search(rf"^\s*# Subtest: {suite}\n(.*?)^(ok|not ok) \d+ {suite}$",
                      kunit_log, re.MULTILINE | re.DOTALL)
    assert block, f"the KUnit suite {suite} did not run (or did not end)"
    cases = re.findall(r"^ {4}(ok|not ok) \d+ (\S+)", block.group(1), re.MULTILINE)
    failed = [name for verdict, name in cases if verdict != "ok"]
    assert not failed and block.group(2) == "ok", f"KUnit cases of {suite} failed: {failed}"
    assert len(cases) >= SUITES[suite], cases
    assert not re.search(r"^\s*ok \d+ .*# SKIP", block.group(1), re.MULTILINE), block.group(1)


def test_kunit_boot_log_is_clean(kunit_log):
    trouble = [m.group(0) for m in KERNEL_TROUBLE.finditer(kunit_log)]
    assert not trouble, f"the kernel reported {trouble} during the KUnit boot"
