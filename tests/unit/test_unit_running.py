"""tusklib.children.unit_running: a unit's state from its cgroup, a file read instead of
a `systemctl is-active` every few seconds (the agent's HA and SNMP status)."""
from tusklib.children import unit_running


def test_a_unit_runs_while_its_cgroup_lists_a_process(tmp_path):
    unit = tmp_path / "tusk-snmpd.service"
    unit.mkdir()
    (unit / "cgroup.procs").write_text("1234\n")
    assert unit_running("tusk-snmpd.service", str(tmp_path))
    (unit / "cgroup.procs").write_text("")
    assert not unit_running("tusk-snmpd.service", str(tmp_path))
    assert not unit_running("tusk-keepalived.service", str(tmp_path))
