"""Classes whose fast-path connections hardware may carry (hardware: true, issue 35
part 2), judged from the guest scenario policy-hardware on Tusk's kernel with netdevsim
ports that take flowtable offload: a hardware class's connection reaches the NIC and
its bytes are still counted; a fast-path class without it stays in software on the
same ports; an auto hardware class waits for its first megabyte on the slow path; a
randomised class never reaches the NIC; and a NIC that cannot offload is refused at
apply, naming the class, with nothing changed."""
import pytest
from saved import load
from test_seqrand import IPS_HW_OFFLOAD, IPS_OFFLOAD, IPS_SEQ_ADJUST

SIZE = 2 * 1024 * 1024


@pytest.fixture(scope="module")
def results(scenario):
    return load(scenario("policy-hardware"), "results.json")


def test_a_hardware_class_connection_is_carried_by_the_nic_and_counted(results):
    hw = results["hw-always"]
    assert hw["transfer"], hw
    assert hw["status"] & IPS_OFFLOAD and hw["status"] & IPS_HW_OFFLOAD, hw
    # one per direction on each of two ports, given again by the flowtable's refresh
    # about once a second (netdevsim counts each replace)
    assert hw["rules_added"] >= 4, hw
    assert min(hw["bytes"]) > SIZE, hw            # conntrack's accounting kept counting


def test_a_fast_path_class_without_hardware_stays_in_software_on_the_same_ports(results):
    soft = results["soft"]
    assert soft["transfer"], soft
    assert soft["status"] & IPS_OFFLOAD and not soft["status"] & IPS_HW_OFFLOAD, soft
    assert soft["rules_added"] == 0, soft
    assert min(soft["bytes"]) > SIZE, soft


def test_an_auto_hardware_class_reaches_the_nic_after_its_first_megabyte(results):
    auto = results["hw-auto"]
    assert auto["early"]["intact"] and not auto["early"]["status"] & IPS_OFFLOAD, auto
    assert auto["transfer"], auto
    assert auto["status"] & IPS_HW_OFFLOAD and auto["rules_added"] >= 4, auto


def test_a_randomised_class_never_reaches_the_nic(results):
    rand = results["seqrand"]
    assert rand["transfer"] and rand["helper"] == "seqrand-bi", rand
    assert rand["status"] & IPS_SEQ_ADJUST and rand["status"] & IPS_OFFLOAD, rand
    assert not rand["status"] & IPS_HW_OFFLOAD and rand["rules_added"] == 0, rand


def test_a_nic_that_cannot_offload_is_refused_naming_the_class(results):
    refused = results["refused"]
    assert refused["returncode"] != 0, refused
    assert "classes[" in refused["output"] and ".hardware" in refused["output"], refused
    assert "vx-in" in refused["output"] and "offers no flowtable offload" in refused["output"]
    assert "Traceback" not in refused["output"], refused
    assert refused["unchanged"], refused
