"""Golden rulesets, fw4 style: each NN_case/ folder holds a line of intent, a policy and
the complete ruleset it must render to; each boot/NN_case/ folder the same for a table
tusk-boot loads (render_boot), its input the render function's arguments (input.json).

On a mismatch the failure shows `diff -u expected actual`. UPDATE_GOLDEN=1 rewrites the
expected files from the renderer instead (then read the diff before committing it).
Every expected ruleset must also pass `nft -c` in a scratch namespace; cases whose policy
needs Tusk's kernel (seqrand helpers, flowtables, the bridge's conntrack) must instead be
refused by this host's kernel only where they use those features: with ENOENT, and for
conntrack in table bridge tusk_bridge with EPROTO (the bridge family has no ct without
CONFIG_NF_CONNTRACK_BRIDGE). The VM tier checks them whole on Tusk's kernel
(vm/test_vm_golden.py).
"""
import difflib
import json
import os
import re
import subprocess
import sys

import pytest

from ha.core import config as ha_config
from network.core import routing
from policy.core import choices, render_boot
from policy.core.normalise import load_policy_file
from policy.core.render import render
from snmp.core import config as snmp_config

HERE = os.path.dirname(os.path.abspath(__file__))
WEBUI = os.path.join(os.path.dirname(os.path.dirname(HERE)), "webui")
BOOT = "boot"
BOOT_RENDER = {"failsafe": render_boot.failsafe, "host": render_boot.host,
               "lockdown": render_boot.lockdown}
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def cases(directory):
    return sorted(d for d in os.listdir(directory) if re.fullmatch(r"\d\d_[a-z0-9_]+", d)
                  and os.path.isdir(os.path.join(directory, d)))


POLICY_CASES = cases(HERE)
BOOT_CASES = [f"{BOOT}/{case}" for case in cases(os.path.join(HERE, BOOT))]
CASES = POLICY_CASES + BOOT_CASES

# nft reports a refused object or rule as FILE:LINE:COL[-COL]: Error: MESSAGE
ERROR_LINE = re.compile(r"^(?P<file>[^:\s]+):(?P<line>\d+):(?P<col>\d+)(?:-\d+)?"
                        r": Error: (?P<msg>.*)$")
# What this host's kernel lacks, as it appears on a line of the ruleset.
VM_ONLY = re.compile(r"^\s*(ct helper \S+ \{|flowtable \S+ \{)|\bct helper set \"|\bflow add @")
# ... and in the bridges' table, any use of conntrack
VM_ONLY_BRIDGED = re.compile(r"\bct (state|mark|direction|helper)\b")
BRIDGE_TABLE_LINE = "table bridge tusk_bridge {"


def path(case, name):
    return os.path.join(HERE, case, name)


def read(case, name):
    with open(path(case, name), encoding="utf-8") as handle:
        return handle.read()


def input_name(case):
    return "input.json" if case.startswith(f"{BOOT}/") else "policy.yaml"


def render_case(case):
    if case.startswith(f"{BOOT}/"):
        arguments = json.loads(read(case, "input.json"))
        if "ha" in arguments:      # an HA pair's ha.toml, as a document
            arguments["ha"] = ha_config.from_document(arguments["ha"])
        if "routing" in arguments:  # network.toml's [routing], as a document
            problems = []
            arguments["routing"] = routing.from_document(arguments["routing"], problems)
            assert not problems, problems
        if "snmp" in arguments:     # snmp.toml, as a document
            arguments["snmp"] = snmp_config.from_document(arguments["snmp"])
        return BOOT_RENDER[arguments.pop("ruleset")](**arguments)
    return render(load_policy_file(path(case, "policy.yaml")))


def needs_vm_kernel(case):
    """Seqrand helpers and flowtables exist only in Tusk's kernel (the VM tier); the boot
    tables use neither."""
    if case.startswith(f"{BOOT}/"):
        return False
    policy = load_policy_file(path(case, "policy.yaml"))
    return bool(policy.bridged_zones) or any(
        c.seqrand != choices.SEQRAND_NONE or c.fastpath != choices.FASTPATH_NEVER
        for c in policy.classes)


def unified_diff(expected, actual, case):
    return "".join(difflib.unified_diff(
        expected.splitlines(keepends=True), actual.splitlines(keepends=True),
        fromfile=f"{case}/expected.nft", tofile=f"{case}/actual (render)"))


@pytest.mark.parametrize("found, least", [(POLICY_CASES, 14), (BOOT_CASES, 4)])
def test_there_are_cases(found, least):
    assert len(found) >= least, found
    numbers = [os.path.basename(c)[:2] for c in found]
    assert len(numbers) == len(set(numbers)), f"two cases share a number: {found}"


def test_every_boot_table_has_a_case():
    rendered = {json.loads(read(case, "input.json"))["ruleset"] for case in BOOT_CASES}
    assert rendered == set(BOOT_RENDER)


@pytest.mark.parametrize("case", CASES)
def test_case_is_complete(case):
    for name in ("intent.txt", input_name(case), "expected.nft"):
        assert os.path.isfile(path(case, name)), f"{case}/{name} is missing"
    intent = read(case, "intent.txt")
    assert len(intent.strip().splitlines()) == 1, f"{case}/intent.txt must be one line"


@pytest.mark.parametrize("case", CASES)
def test_render_matches_expected(case):
    actual = render_case(case)
    if UPDATE:
        with open(path(case, "expected.nft"), "w", encoding="utf-8") as handle:
            handle.write(actual)
        return
    expected = read(case, "expected.nft")
    if actual != expected:
        pytest.fail(f"{case}: {read(case, 'intent.txt').strip()}\n"
                    f"rendered ruleset differs from expected.nft "
                    f"(UPDATE_GOLDEN=1 rewrites it):\n{unified_diff(expected, actual, case)}",
                    pytrace=False)


@pytest.mark.parametrize("case", CASES)
def test_render_is_deterministic(case):
    assert render_case(case).encode() == render_case(case).encode()
    if case in POLICY_CASES:
        policy = load_policy_file(path(case, "policy.yaml"))
        assert render(policy).encode() == render(policy).encode()


_RENDER_ALL = """
import json, sys
from test_golden import render_case
print(json.dumps({c: render_case(c) for c in sys.argv[1:]}))
"""


@pytest.mark.parametrize("seed", ["0", "1", "4242"])
def test_render_does_not_depend_on_hash_seed(seed):
    """Set iteration order changes with PYTHONHASHSEED; the rendered bytes must not."""
    result = subprocess.run([sys.executable, "-c", _RENDER_ALL, *CASES], cwd=WEBUI,
                            env=dict(os.environ, PYTHONHASHSEED=seed,
                                     PYTHONPATH=os.pathsep.join([WEBUI, HERE])),
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    rendered = json.loads(result.stdout)
    for case in CASES:
        assert rendered[case] == render_case(case), (
            f"{case} renders differently with PYTHONHASHSEED={seed}")


@pytest.mark.parametrize("case", CASES)
def test_expected_passes_nft_check(case, nft_check):
    expected = read(case, "expected.nft")
    result = nft_check(expected)
    if not needs_vm_kernel(case):
        assert result.returncode == 0, f"nft -c refused {case}/expected.nft:\n{result.stderr}"
        return

    # This host has neither the seqrand helpers nor flowtables: nft -c must fail, and
    # only on the lines that use them, with ENOENT - so everything else parsed and the
    # kernel accepted it.
    assert result.returncode != 0, f"{case}: nft -c accepted helpers/flowtables this host lacks"
    lines = expected.splitlines()
    bridge_from = lines.index(BRIDGE_TABLE_LINE) + 1
    vm_lines = {number for number, text in enumerate(lines, 1) if VM_ONLY.search(text)
                or number > bridge_from and VM_ONLY_BRIDGED.search(text)}
    assert vm_lines, f"{case} needs the VM kernel but uses no helper or flowtable"
    errors = [line for line in result.stderr.splitlines() if "Error" in line]
    assert errors, f"{case}: nft -c failed without an error line:\n{result.stderr}"
    refused = set()
    for error in errors:
        match = ERROR_LINE.match(error)
        assert match, f"{case}: nft error without FILE:LINE:COL: {error!r}\n{result.stderr}"
        number = int(match["line"])
        missing = ("No such file or directory", "Protocol error") if number > bridge_from \
            else ("No such file or directory",)
        assert match["msg"].endswith(missing), (
            f"{case}: line {number} refused for another reason than a missing kernel "
            f"feature:\n  {lines[number - 1].strip()}\n{result.stderr}")
        assert number in vm_lines, (
            f"{case}: nft -c refused line {number}, which uses no helper or flowtable:\n"
            f"  {lines[number - 1].strip()}\n{result.stderr}")
        refused.add(number)
    assert refused == vm_lines, (
        f"{case}: nft -c did not refuse every helper/flowtable line; not refused: "
        + ", ".join(f"{n}: {lines[n - 1].strip()}" for n in sorted(vm_lines - refused)))


@pytest.mark.parametrize("case", [c for c in POLICY_CASES if needs_vm_kernel(c)])
def test_without_flowtables_auto_classes_stay_on_a_slow_path_this_kernel_takes(case, nft_check):
    """expected.nft is what Tusk's kernel loads; on a kernel without flowtables (this
    host's) the applier renders the same policy with flowtable=False: no flowtable, no
    promotion, and - unless the policy needs a helper or an always class - a ruleset this
    kernel takes whole."""
    policy = load_policy_file(path(case, "policy.yaml"))
    slow = render(policy, flowtable=False)
    assert "flow add @" not in slow or any(c.always_fast for c in policy.classes), case
    if policy.bridged_zones or any(c.seqrand != choices.SEQRAND_NONE or c.always_fast
                                   for c in policy.classes):
        return
    assert "flowtable" not in slow
    result = nft_check(slow)
    assert result.returncode == 0, f"nft -c refused {case} without flowtables:\n{result.stderr}"
