"""make bench's smoke run: one round of 1 s flows per row and condition on Tusk's
kernel, on the FWSM-emulation kernel and on the host. The numbers of such a run mean
nothing; what is checked is that the report is complete and well-formed - every row
of every table measured, with numbers where numbers belong, the goals stated and a
plot with a bar per measured cell. The full run (make bench) is a benchmark."""
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from lab.paths import ROOT

BENCH = ROOT / "tests" / "bench" / "bench_flow.py"
MBIT = re.compile(r"^\d+ \(\d+-\d+\)$")
RATIO = re.compile(r"^\d+\.\d\d$")
ROW_NAMES = {1: "Control", 2: "FWSM default", 3: "FWSM optimised", 4: "Tusk defaults",
             5: "Tusk + seqrand", 6: "Tusk, jumbo frames", 7: "Tusk, fast path",
             8: "Tusk + seqrand, fast path"}


def tables(markdown):
    """{section heading: [[cell, ...] per body row]} of the markdown's pipe tables."""
    found, heading, rows = {}, None, None
    for line in markdown.splitlines():
        if line.startswith("## "):
            heading, rows = line[3:].strip(), None
        elif line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if rows is None:
                rows = found.setdefault(heading, [])
                rows.append(cells)          # the header
            elif not set("".join(cells)) <= {"-"}:
                rows.append(cells)
    return found


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench-flow")
    env = dict(os.environ, BENCH_SMOKE="1", BENCH_OUT=str(out))
    result = subprocess.run([sys.executable, str(BENCH)], env=env, capture_output=True,
                            text=True, timeout=3600)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return out, result.stdout


def check_table(rows, expected_rows, conditions):
    header, body = rows[0], rows[1:]
    assert [int(r[0]) for r in body] == expected_rows, body
    for row in body:
        assert row[1] == ROW_NAMES[int(row[0])]
        for c in range(conditions):
            mbit, ratio, retrans, discarded = row[2 + 4 * c:6 + 4 * c]
            assert MBIT.match(mbit), (row, header)
            assert RATIO.match(ratio), (row, header)
            assert retrans.isdigit() and discarded.isdigit(), row
            assert float(mbit.split()[0]) > 0, row
        if int(row[0]) == 1:
            assert all(row[3 + 4 * c] == "1.00" for c in range(conditions)), row


def test_vm_table_has_every_row_in_both_conditions(smoke):
    out, _ = smoke
    found = tables((out / "PERFORMANCE.md").read_text())
    vm = next(rows for heading, rows in found.items() if heading.startswith("Tusk's kernel"))
    assert "no loss" in vm[0][2] and "1% loss" in vm[0][6]
    check_table(vm, [1, 2, 3, 4, 5, 6, 7, 8], 2)
    anchors = {int(r[0]): r[-1] for r in vm[1:]}
    assert anchors[2].startswith("FWSM default 458 (0.56)")
    assert anchors[3].startswith("FWSM optimised 615 (0.75)")
    assert anchors[6].startswith("FWSM jumbo (MTU 8500) 686 (0.84)")
    assert "845 vs 868 (0.97)" in anchors[4]


def test_host_table_has_rows_1_3_4_6(smoke):
    out, _ = smoke
    found = tables((out / "PERFORMANCE.md").read_text())
    host = next(rows for heading, rows in found.items() if heading.startswith("Host kernel"))
    conditions = 2 if len(host[0]) > 7 else 1
    check_table(host, [1, 3, 4, 6], conditions)


def test_report_states_goals_method_and_machine(smoke):
    out, stdout = smoke
    text = (out / "PERFORMANCE.md").read_text()
    goals = re.findall(r"^- row ([45]) \(.*\), (no loss|1% loss, 20 ms RTT): x(\d+\.\d\d) "
                       r"\(goal >= (0\.9[5789])\): (met|NOT met)$", text, re.M)
    assert len(goals) == 4, text
    assert len(re.findall(r"^- for comparison, row 7 \(Tusk, fast path\), .*: x\d+\.\d\d$",
                          text, re.M)) == 2, text
    # issue 35: the defaults >= 0.99 without loss and >= 0.97 with; seqrand >= 0.98
    wanted = {("4", "no loss"): "0.99", ("4", "1% loss, 20 ms RTT"): "0.97",
              ("5", "no loss"): "0.98", ("5", "1% loss, 20 ms RTT"): "0.95"}
    for row, condition, ratio, goal, verdict in goals:
        assert goal == wanted[(row, condition)]
        assert (verdict == "met") == (float(ratio) >= float(goal))
    fast = re.findall(r"^- row 8 (?:over row 7 )?\(.*\), (no loss|1% loss, 20 ms RTT): "
                      r"x(\d+\.\d\d) \(goal >= (0\.9[578])\): (met|NOT met)$", text, re.M)
    assert [(c, g) for c, _, g, _ in fast] == [
        ("no loss", "0.97"), ("1% loss, 20 ms RTT", "0.95"), ("no loss", "0.98")], text
    for _, ratio, goal, verdict in fast:
        assert (verdict == "met") == (float(ratio) >= float(goal))
    assert "tests/bench/fwsm/0001-seqadj-leave-SACK-blocks-untranslated.patch" in text
    assert re.search(r"guest \(Tusk kernel\): Linux 6\.12\.\d+", text)
    assert re.search(r"guest \(FWSM-emulation kernel\): Linux 6\.12\.\d+", text)
    assert "(smoke run)" in text
    assert "row 4 (Tusk defaults), no loss" in stdout


def test_fwsm_row_discards_sack_blocks_only_on_its_own_kernel(smoke):
    """The emulation is real: with loss, the sender behind the FWSM-emulation kernel
    gets SACK blocks it cannot use; behind Tusk's kernel with seqrand it gets none."""
    out, _ = smoke
    found = tables((out / "PERFORMANCE.md").read_text())
    vm = {int(r[0]): r for r in next(rows for heading, rows in found.items()
                                     if heading.startswith("Tusk's kernel"))[1:]}
    loss_retrans, loss_discarded = 8, 9
    if int(vm[2][loss_retrans]) == 0:
        pytest.skip("no segment was lost in the smoke run's 1 s flow of row 2")
    assert int(vm[2][loss_discarded]) > 0, vm[2]
    assert int(vm[5][loss_discarded]) == 0, vm[5]


def test_plot_has_a_bar_per_measured_cell(smoke):
    out, _ = smoke
    svg = ET.parse(out / "performance.svg").getroot()
    bars = [e for e in svg.iter("{http://www.w3.org/2000/svg}rect")
            if e.get("class") == "bar"]
    cells = {(b.get("data-row"), b.get("data-series")) for b in bars}
    vm_cells = {(str(r), s) for r in range(1, 9) for s in ("0", "1")}
    host_cells = {(str(r), "2") for r in (1, 3, 4, 6)}
    assert cells == vm_cells | host_cells
    assert all(float(b.get("height")) > 0 for b in bars)
