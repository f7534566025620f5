"""The KUnit tests of kernel-patches/ (NF_CONNTRACK_SEQADJ_KUNIT_TEST), run by the
test kernel at boot with kunit.enable=1: every case of the suite must pass, and the
kernel must report nothing wrong while they run (a case that provokes a warning is
a bug to bots and to panic_on_warn)."""
import re

from vm import KERNEL_TROUBLE

SUITE = "nf_conntrack_seqadj"


def test_seqadj_kunit_suite_passes(kunit_log):
    assert f"# Subtest: {SUITE}" in kunit_log, "the KUnit suite did not run"
    failed = re.findall(r"^\s*not ok \d+ (.*)$", kunit_log, re.MULTILINE)
    assert not failed, f"KUnit cases failed: {failed}"
    summary = re.search(rf"^\s*# {SUITE}: pass:(\d+) fail:(\d+) skip:(\d+) total:(\d+)",
                        kunit_log, re.MULTILINE)
    assert summary, "no summary line for the suite"
    passed, failed, skipped, total = map(int, summary.groups())
    assert (failed, skipped) == (0, 0) and passed == total >= 10, summary.group(0)
    assert re.search(rf"^ok \d+ {SUITE}$", kunit_log, re.MULTILINE)


def test_kunit_boot_log_is_clean(kunit_log):
    trouble = [m.group(0) for m in KERNEL_TROUBLE.finditer(kunit_log)]
    assert not trouble, f"the kernel reported {trouble} during the KUnit boot"
