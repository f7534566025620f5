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
    assert f"# Subtest: {suite}" in kunit_log, f"the KUnit suite {suite} did not run"
    failed = re.findall(r"^\s*not ok \d+ (.*)$", kunit_log, re.MULTILINE)
    assert not failed, f"KUnit cases failed: {failed}"
    summary = re.search(rf"^\s*# {suite}: pass:(\d+) fail:(\d+) skip:(\d+) total:(\d+)",
                        kunit_log, re.MULTILINE)
    assert summary, f"no summary line for the suite {suite}"
    passed, failed, skipped, total = map(int, summary.groups())
    assert (failed, skipped) == (0, 0) and passed == total >= SUITES[suite], summary.group(0)
    assert re.search(rf"^ok \d+ {suite}$", kunit_log, re.MULTILINE)


def test_kunit_boot_log_is_clean(kunit_log):
    trouble = [m.group(0) for m in KERNEL_TROUBLE.finditer(kunit_log)]
    assert not trouble, f"the kernel reported {trouble} during the KUnit boot"
