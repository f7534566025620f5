"""Golden plans: each fake machine (fakehw.MACHINES) x profile -> the exact, ordered
list of writes and the warnings `tusk-tune plan` prints, compared with
golden/<machine>/<case>.plan. The CLI runs as an operator runs it, on a fake tree.

After an intended change: UPDATE_GOLDEN=1 pytest tuning -k golden_plan; git diff tuning/golden
"""
import os
import subprocess
from pathlib import Path

import fakehw
import pytest
from tunetree import tune

HERE = Path(__file__).parent
PROFILES = ("throughput", "latency", "conservative")
# (machine, case name, arguments after `plan`, arguments before it)
CASES = [(machine, profile, [profile], ["--no-policy"])
         for machine in fakehw.MACHINES for profile in PROFILES] + [
    ("10g-in-gen2-x1", "site-jumbo", ["site-jumbo"],
     ["--no-policy", "--profile-dir", str(HERE / "profiles")]),
    ("10g-in-gen2-x1", "site-jumbo-with-policy", ["site-jumbo"],
     ["--policy", str(HERE / "policy-storage.yaml"), "--profile-dir", str(HERE / "profiles")]),
]


def plan_text(tmp_path, machine, before, after):
    root = fakehw.build(fakehw.MACHINES[machine], str(tmp_path / machine))
    result = tune(root, *before, "plan", *after)
    assert result.returncode == 0, result.stderr
    return result.stdout.replace(str(root), "<tree>").replace(str(HERE), "<tests>")


@pytest.mark.parametrize("machine,case,after,before", CASES,
                         ids=[f"{m}/{c}" for m, c, _, _ in CASES])
def test_golden_plan(tmp_path, machine, case, after, before):
    actual = plan_text(tmp_path, machine, before, after)
    expected_file = HERE / "golden" / machine / f"{case}.plan"
    if os.environ.get("UPDATE_GOLDEN"):
        expected_file.parent.mkdir(parents=True, exist_ok=True)
        expected_file.write_text(actual)
    expected = expected_file.read_text()
    if actual != expected:
        (tmp_path / "actual").write_text(actual)
        diff = subprocess.run(["diff", "-u", str(expected_file), str(tmp_path / "actual")],
                              capture_output=True, text=True).stdout
        pytest.fail(f"plan differs from {expected_file}:\n{diff}", pytrace=False)


def test_every_machine_and_profile_has_a_golden_file():
    found = {str(p.relative_to(HERE / "golden")) for p in (HERE / "golden").glob("*/*.plan")}
    assert found == {f"{m}/{c}.plan" for m, c, _, _ in CASES}
