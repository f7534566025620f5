"""The self-test's measurement core (webui/selftest/core) on loopback: the responder's
protocol and bounds, the measuring client's failure kinds against peers that misbehave
on purpose, the statistics and the table."""
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kit import wait_until

from selftest.core import control, responder, stats, table
from selftest.core.responder import Measurer, ParamError, Responder, check_params, check_paths

FAST = {"transactions": 4, "pings": 4, "bulk": 2, "bulk_bytes": 65536, "timeout": 0.5}


@pytest.fixture
def serve():
    """serve(**kwargs) -> port of a Responder on 127.0.0.1, stopped after the test."""
    servers = []

    def start(**kwargs):
        server = Responder(("127.0.0.1", 0), **kwargs)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server.server_address[1]
    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def peer():
    """peer(behaviour) -> port of a listener that runs behaviour(connection) per client."""
    listeners = []

    def start(behaviour):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        listeners.append(listener)

        def accept():
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                threading.Thread(target=behaviour, args=(conn,), daemon=True).start()
        threading.Thread(target=accept, daemon=True).start()
        return listener.getsockname()[1]
    yield start
    for listener in listeners:
        listener.close()


def talk(port, data, size=4096):
    """What the responder answers to data, until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(size):
            answer += chunk
        return answer


def measure(port, **params):
    checked = check_params({**FAST, **params})
    return Measurer([("through", "127.0.0.1", port)], checked).run()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- parameters --------------------------------------------------------------------

def test_parameters_get_defaults_and_keep_to_their_bounds():
    assert check_params({}) == {"transactions": 500, "pings": 500, "bulk": 50,
                                "bulk_bytes": 1 << 20, "timeout": 5.0, "max_seconds": 900}
    assert check_params({"timeout": 1})["timeout"] == 1.0


@pytest.mark.parametrize("params, field, message", [
    ({"transactions": 10_001}, "transactions", "10001 is outside 0..10000"),
    ({"pings": -1}, "pings", "-1 is outside 0..100000"),
    ({"bulk": 2.5}, "bulk", "2.5 is not an integer"),
    ({"bulk": True}, "bulk", "True is not an integer"),
    ({"bulk_bytes": 100}, "bulk_bytes", "100 is outside 1024..67108864"),
    ({"timeout": "5"}, "timeout", "'5' is not a number"),
    ({"timeout": 0.01}, "timeout", "0.01 is outside 0.1..60.0"),
    ({"max_seconds": 0}, "max_seconds", "0 is outside 1..3600"),
    ({"rounds": 3}, "rounds", "unknown parameter"),
])
def test_bad_parameters_are_refused_naming_the_field(params, field, message):
    with pytest.raises(ParamError) as caught:
        check_params(params)
    assert [f for f, _ in caught.value.errors] == [field]
    assert message in str(caught.value) and str(caught.value).startswith(f"{field}: ")


@pytest.mark.parametrize("paths, field", [
    ([], "paths"),
    ([{"name": "a", "host": "h", "port": 1}] * 3, "paths"),
    ([{"name": "not a name", "host": "h", "port": 1}], "paths[0].name"),
    ([{"name": "a", "host": "h h", "port": 1}], "paths[0].host"),
    ([{"name": "a", "host": "h", "port": 70000}], "paths[0].port"),
    ([{"name": "a", "host": "h", "port": 1}, {"name": "a", "host": "g", "port": 1}], "paths"),
])
def test_bad_paths_are_refused_naming_the_field(paths, field):
    with pytest.raises(ParamError) as caught:
        check_paths(paths)
    assert caught.value.errors[0][0] == field


# -- the responder's protocol ------------------------------------------------------

def test_a_transaction_is_answered_with_its_token_and_closed(serve):
    port = serve()
    token = "a" * responder.TOKEN_SIZE
    assert talk(port, f"TXN {token}\n".encode()) == f"ACK {token}\n".encode()


def test_pings_are_echoed_on_one_connection(serve):
    port = serve()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"PING\n")
        for number in range(3):
            message = f"P{number:014d}\n".encode()
            sock.sendall(message)
            assert sock.recv(16) == message


def test_a_bulk_transfer_gets_its_last_four_bytes_back(serve):
    port = serve()
    body = bytes(100_000) + b"\x01\x02\x03\x04"
    assert talk(port, f"BULK {len(body)}\n".encode() + body) == b"\x01\x02\x03\x04"


@pytest.mark.parametrize("request_bytes, reason", [
    (b"HELLO\n", "unknown request 'HELLO'"),
    (b"TXN short\n", "unknown request 'TXN short'"),
    (b"X" * 300, "header longer than 256 bytes"),
    (b"\xff\xfe\n", "header is not ASCII"),
    (f"BULK {64 << 20 | 1}\n".encode(), "BULK size must be 1..67108864"),
    (b"BULK -5\n", "BULK size must be 1..67108864, not '-5'"),
    (b"CTRL 10\n{}", "control requests are not accepted from 127.0.0.1 (see --allow)"),
    (b"CTRL 99999999\n", "CTRL size must be 1..65536"),
])
def test_the_responder_refuses_bad_input(serve, request_bytes, reason):
    answer = talk(serve(), request_bytes).decode()
    assert answer.startswith("ERR ") and reason in answer, answer


def test_connections_beyond_the_limit_are_told_busy(serve, monkeypatch):
    monkeypatch.setattr(responder, "MAX_CONNECTIONS", 1)
    port = serve()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as held:
        held.sendall(b"PING\n")
        wait_until(lambda: talk(port, b"PING\n") == b"ERR busy: too many connections\n", 5,
                   "the second connection told busy")
    wait_until(lambda: talk(port, b"TXN " + b"b" * responder.TOKEN_SIZE + b"\n")
               .startswith(b"ACK "), 5, "the slot free again")


def test_control_runs_the_measurement_for_an_allowed_address(serve):
    target = serve()
    port = serve(allow=["127.0.0.0/8"])
    seen = []
    raw = control.request(("127.0.0.1", port),
                          [{"name": "through", "host": "127.0.0.1", "port": target}],
                          FAST, progress=lambda percent, text: seen.append(percent))
    assert {m: len(raw["samples"][m]["through"]) for m in responder.METRICS} == \
        {"transaction": 4, "feedback": 4, "bulk": 2}
    assert seen and seen[-1] == 100
    body = b'{"paths": [{"name": "t", "host": "x", "port": 0}]}'
    answer = talk(port, f"CTRL {len(body)}\n".encode() + body).decode()
    assert answer == "ERR bad control request: paths[0].port: 0 is not a TCP port\n"


def test_a_control_request_to_nowhere_fails_clearly():
    with pytest.raises(control.ControlError, match="cannot reach the client host's responder"):
        control.request(("127.0.0.1", free_port()),
                        [{"name": "through", "host": "127.0.0.1", "port": 1}], FAST)


def test_the_responder_runs_standalone_with_only_the_standard_library(tmp_path):
    copy = tmp_path / "responder.py"     # alone, away from the package
    copy.write_bytes(Path(responder.__file__).read_bytes())
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-I", str(copy), "--port", str(port), "--bind",
                             "127.0.0.1"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == f"listening on 127.0.0.1 port {port}\n"
        raw = measure(port)
        assert sum(len(v["through"]) for v in raw["samples"].values()) == 10
    finally:
        proc.terminate()
        proc.wait(10)
    bad = subprocess.run([sys.executable, str(copy), "--port", "0"], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "--port: 0 is not a TCP port" in bad.stderr


# -- failures, by kind -------------------------------------------------------------

def test_a_good_responder_gives_every_sample_and_no_failure(serve):
    raw = measure(serve())
    assert {m: len(raw["samples"][m]["through"]) for m in responder.METRICS} == \
        {"transaction": 4, "feedback": 4, "bulk": 2}
    assert all(raw["failures"][m]["through"] == {} for m in responder.METRICS)
    assert raw["incomplete"] == ""


def test_nothing_listening_counts_refused():
    raw = measure(free_port())
    assert {m: raw["failures"][m]["through"] for m in responder.METRICS} == \
        {"transaction": {"refused": 4}, "feedback": {"refused": 4}, "bulk": {"refused": 2}}


def _reset(conn):
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.recv(64)
    conn.close()


def _silent(conn):
    time.sleep(3)
    conn.close()


def _short(conn):
    conn.recv(64)
    conn.sendall(b"ACK ")
    conn.close()


def _wrong(conn):
    data = conn.recv(64)
    conn.sendall(data[:4] + b"x" * (responder.REQUEST_SIZE - 4))
    conn.close()


@pytest.mark.parametrize("behaviour, kind", [
    (_reset, "reset"), (_silent, "timeout"), (_short, "short"), (_wrong, "wrong-echo")])
def test_a_misbehaving_peer_is_counted_by_kind(peer, behaviour, kind):
    raw = measure(peer(behaviour), pings=0, bulk=0, timeout=0.3)
    assert raw["failures"]["transaction"]["through"] == {kind: 4}
    assert raw["samples"]["transaction"]["through"] == []


def test_a_refusing_responder_is_told_apart_from_a_short_answer(peer):
    def refuse(conn):
        conn.recv(64)
        conn.sendall(b"ERR no\n")
        conn.close()
    raw = measure(peer(refuse), pings=0, bulk=0)
    assert raw["failures"]["transaction"]["through"] == {"refused-by-responder": 4}


def test_a_failed_ping_opens_a_new_connection(peer):
    """Each connection echoes one ping, then closes: every second ping fails (the end
    of the stream, or a reset when the ping reached the closed socket first) and the
    next one succeeds on a new connection, as in Allman's procedure."""
    connections = []

    def one_echo(conn):
        connections.append(conn)
        conn.recv(5)
        conn.sendall(conn.recv(16))
        conn.close()
    raw = measure(peer(one_echo), transactions=0, pings=6, bulk=0)
    assert len(raw["samples"]["feedback"]["through"]) == 3
    failures = raw["failures"]["feedback"]["through"]
    assert sum(failures.values()) == 3 and set(failures) <= {"short", "reset"}, failures
    assert len(connections) == 3


def test_a_wrong_bulk_echo_is_a_failure(peer):
    def wrong_tail(conn):
        conn.settimeout(5)
        header = b""
        while not header.endswith(b"\n"):
            header += conn.recv(1)
        wanted = int(header.split()[1])
        while wanted:
            wanted -= len(conn.recv(min(wanted, 65536)))
        conn.sendall(b"\0\0\0\0")
        conn.close()
    raw = measure(peer(wrong_tail), transactions=0, pings=0, bulk=3)
    assert raw["failures"]["bulk"]["through"] == {"wrong-echo": 3}


def test_a_run_stops_at_max_seconds(peer):
    raw = measure(peer(_silent), transactions=50, pings=0, bulk=0, timeout=0.5, max_seconds=1)
    assert 2 <= raw["failures"]["transaction"]["through"]["timeout"] <= 4
    assert raw["incomplete"] == "stopped after max_seconds (1 s)"


# -- statistics and the table ------------------------------------------------------

def test_percentiles_interpolate_between_ranks():
    assert stats.percentile([1, 2, 3, 4, 5], 0.5) == 3
    assert stats.percentile([1, 2, 3, 4], 0.5) == 2.5
    assert stats.percentile([10, 20], 0.1) == pytest.approx(11)
    assert stats.percentile([7], 0.9) == 7
    assert stats.percentile([], 0.5) is None
    assert stats.describe([5, 1, 3]) == {"median": 3, "p10": 1.4, "p90": 4.6, "min": 1,
                                         "max": 5}


def _raw(direct=True):
    paths = [{"name": "through", "host": "10.10.2.2", "port": 8009}]
    samples = {"transaction": {"through": [2.0, 4.0, 6.0]}, "feedback": {"through": [1.0]},
               "bulk": {"through": [8.0, 16.0]}}
    failures = {"transaction": {"through": {"timeout": 1, "refused": 2}},
                "feedback": {"through": {}}, "bulk": {"through": {}}}
    if direct:
        paths.append({"name": "direct", "host": "10.10.9.2", "port": 8009})
        for metric, values in (("transaction", [1.0, 2.0, 3.0]), ("feedback", []),
                               ("bulk", [8.0])):
            samples[metric]["direct"] = values
            failures[metric]["direct"] = {"reset": 1} if metric == "feedback" else {}
    return {"version": 1, "paths": paths, "params": check_params({"bulk_bytes": 1_000_000}),
            "samples": samples, "failures": failures, "incomplete": ""}


def test_the_summary_has_every_metric_and_path_and_the_ratios():
    summary = stats.summarise(_raw())
    row = summary["metrics"]["transaction"]["through"]
    assert row == {"samples": 3, "failures": 3, "failure_kinds": {"refused": 2, "timeout": 1},
                   "ms": {"median": 4.0, "p10": 2.4, "p90": 5.6, "min": 2.0, "max": 6.0}}
    # rates per sample: 8 Mbit in 8 and 16 ms, 1000 and 500 Mbit/s
    assert summary["metrics"]["bulk"]["through"]["mbps"]["median"] == 750.0
    assert summary["metrics"]["bulk"]["direct"]["mbps"]["median"] == 1000.0
    assert summary["ratios"] == {"transaction": 2.0, "feedback": None, "bulk": 1.5}
    assert summary["baseline"] is True


def test_the_table_has_a_row_per_metric_and_path():
    text = table.format_table(stats.summarise(_raw()))
    lines = text.splitlines()
    assert lines[0].split() == ["metric", "path", "samples", "failures", "median", "p10-p90",
                                "min-max", "through/direct"]
    assert set(lines[1]) == {"-", " "}
    assert len(lines) == 2 + 6
    assert lines[2].split()[:6] == ["transaction", "through", "3", "3", "(refused", "2,"]
    assert lines[2].split()[-1] == "2.00" and lines[3].split()[-1] == "-"
    assert "bulk 976 KiB  through" in text and "750.0 Mbit/s" in text
    feedback_direct = [line for line in lines if line.startswith("feedback") and "direct" in line]
    assert feedback_direct[0].split()[2:7] == ["0", "1", "(reset", "1)", "-"]


def test_without_a_direct_path_the_table_says_there_is_no_baseline():
    summary = stats.summarise(_raw(direct=False))
    assert summary["ratios"] == {} and summary["baseline"] is False
    text = table.format_table(summary)
    assert len(text.splitlines()) == 2 + 3 + 1
    assert text.endswith("no direct path given: no baseline, through/direct is not known")


# -- the [selftest] section of the configuration file ------------------------------

CONFIG = """[web]
secret_key_file = "secret"
allowed_hosts = ["fw.example.net"]
[database]
name = "tusk"
user = "tusk"
"""
LAB = '[selftest]\nclient_netns = "c"\nserver_netns = "s"\nserver_address = "10.10.2.2"\n'


def _load(tmp_path, text):
    from tusklib import config
    (tmp_path / "secret").write_text("s3cret\n")
    (tmp_path / "tusk.toml").write_text(text)
    return config.load(str(tmp_path / "tusk.toml"))


def test_the_selftest_section_defaults_to_hardware_mode_and_reads_lab_mode(tmp_path):
    loaded = _load(tmp_path, CONFIG)
    assert (loaded.selftest_client_netns, loaded.selftest_port) == ("", 8009)
    loaded = _load(tmp_path, CONFIG + LAB + 'direct_address = "10.10.9.2"\nport = 8010\n')
    assert (loaded.selftest_client_netns, loaded.selftest_server_netns,
            loaded.selftest_server_address, loaded.selftest_direct_address,
            loaded.selftest_port) == ("c", "s", "10.10.2.2", "10.10.9.2", 8010)


@pytest.mark.parametrize("extra, message", [
    ('[selftest]\nclient_netns = "c"\n', "[selftest] server_netns: missing (lab mode needs"),
    (LAB.replace('server_address = "10.10.2.2"\n', ""), "[selftest] server_address: missing"),
    (LAB + 'direct_address = "server"\n', "[selftest] direct_address: 'server' is not an IP"),
    (LAB + "port = 0\n", "[selftest] port: 0 is not a TCP port"),
    ("[selftest]\nport = 70000\n", "[selftest] port: 70000 is not a TCP port"),
    ("[selftest]\nhost = 1\n", "[selftest] host: unknown key"),
])
def test_selftest_configuration_problems_are_named(tmp_path, extra, message):
    from tusklib import config
    with pytest.raises(config.ConfigError, match=re.escape(message)):
        _load(tmp_path, CONFIG + extra)
