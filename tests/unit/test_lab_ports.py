"""Labs side by side (lab/ports.py, what tools/tusk-lab takes its ports with): a second lab
of the same name, or a port another lab or program holds, is refused with one line
naming the holder; ports not asked for are free ones. Needs root (/run/tusk-lab)."""
import os
import socket

import pytest

from lab import ports
from lab.ports import Claim, PortTaken


@pytest.fixture
def claims():
    """claim(name): a Claim released at the end (names of this test's own)."""
    if os.geteuid() != 0:
        pytest.fail("the lab's port claims live in /run/tusk-lab: run as root")
    taken = []

    def claim(name):
        taken.append(Claim(f"unit{os.getpid()}-{name}"))
        return taken[-1]
    yield claim
    for held in taken:
        held.release()
        (ports.RUN / f"{held.name}.lock").unlink(missing_ok=True)   # names never used again


def test_a_second_lab_of_the_same_name_is_refused_in_one_line(claims):
    first = claims("a")
    with pytest.raises(PortTaken) as refused:
        claims("a")
    assert str(refused.value) == (f"lab {first.name} is already running (pid {os.getpid()}): "
                                  "stop it first, or start another with another name "
                                  "(make run LAB=...)")


def test_ports_not_asked_for_differ_between_labs(claims):
    a, b = claims("a"), claims("b")
    http_a, pg_a = a.choose()
    http_b, pg_b = b.choose()
    assert abs(http_a - http_b) >= ports.HTTP_LISTENERS and pg_a != pg_b
    assert ports.running_labs()[a.name] == {"pid": os.getpid(), "http": http_a,
                                            "postgresql": pg_a}


def test_a_port_another_lab_holds_is_refused_naming_the_lab(claims):
    a = claims("a")
    http, pg = a.choose()
    b = claims("b")
    with pytest.raises(PortTaken, match=rf"^HTTP port {http + 2} is taken by lab {a.name} "
                                        rf"\(pid {os.getpid()}\): choose another"):
        b.choose(http=http + 2)        # its third listener is lab a's redirect port
    with pytest.raises(PortTaken, match=rf"^PostgreSQL port {pg} is taken by lab {a.name} "):
        b.choose(pg=pg)
    assert b.name not in ports.running_labs()     # nothing recorded for a refused lab


def test_a_port_another_program_listens_on_is_refused_naming_it(claims):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(PortTaken, match=rf"^HTTP port {port} is taken by another program "
                                            r"\(python"):
            claims("a").choose(http=port)


def test_a_released_lab_frees_its_name_and_ports(claims):
    a = claims("a")
    a.choose()
    a.release()
    assert a.name not in ports.running_labs()
    claims("a")                        # the name is free again
