"""The KUnit tests of kernel-patches/ (0011, NF_CONNTRACK_SEQADJ_KUNIT_TEST), run by
the test kernel at boot with kunit.enable=1: every case of the suite must pass."""
import re

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
