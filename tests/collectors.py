"""nfdump's side of the flow export tests (issue 40): a capture file of nfcapd read back
as its JSON records, each with the observation domain (IPFIX) or source id (v9) of the
exporter that sent it - what `nfdump -E` lists for the record's export_sysid; and a burst
of datagrams kept by a sink (SINK: a socket with a buffer no burst fills) replayed into
nfcapd at a pace it takes on a loaded host, so that a test judges what the exporter
sent, not how fast a collector drains its socket."""
import json
import shutil
import signal
import socket
import struct
import subprocess
import time

from kit import wait_until

# python3 -c SINK ADDRESS PORT FILE: every datagram to FILE, each after its length
SINK = """
import socket, struct, sys
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)      # SO_RCVBUFFORCE
sock.bind((sys.argv[1], int(sys.argv[2])))
print("listening", flush=True)
with open(sys.argv[3], "wb") as out:
    while True:
        data = sock.recv(65535)
        out.write(struct.pack("!I", len(data)) + data)
        out.flush()
"""


def need_nfdump():
    import pytest  # here: the guest's scenarios import SINK, and have no pytest
    if shutil.which("nfcapd") is None or shutil.which("nfdump") is None:
        pytest.fail("missing: nfcapd, nfdump (Debian package nfdump) - run `make test`")


def records(directory):
    """Every record of nfcapd's files in directory (nfcapd stopped: it writes a file at
    its end), as nfdump's JSON, with "domain"."""
    found = []
    for path in sorted(directory.glob("nfcapd.2*")):
        domains = {}
        for line in subprocess.run(["nfdump", "-E", str(path)], capture_output=True,
                                   text=True, check=True).stdout.splitlines():
            if line.startswith("SysID:"):
                fields = dict(part.strip().split(":", 1) for part in line.split(", ")
                              if ":" in part)
                domains[int(fields["SysID"])] = int(fields["ID"])
        out = subprocess.run(["nfdump", "-r", str(path), "-o", "json"], capture_output=True,
                             text=True, check=True).stdout
        # a file without records reads "No matching flows" inside the brackets
        for record in json.loads(out.replace("No matching flows", "") or "[]"):
            record["domain"] = domains.get(record["export_sysid"])
            found.append(record)
    return found


def replay(data, directory):
    """data (SINK's file) sent over loopback to an nfcapd writing to directory, one
    datagram a millisecond; the records it kept."""
    need_nfdump()
    directory.mkdir()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    collector = subprocess.Popen(["nfcapd", "-b", "127.0.0.1", "-p", str(port), "-w",
                                  str(directory), "-t", "3600"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: f":{port} " in subprocess.run(
            ["ss", "-Hlun"], capture_output=True, text=True).stdout, 10, "nfcapd listening")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            position = 0
            while position < len(data):
                length = struct.unpack_from("!I", data, position)[0]
                sender.sendto(data[position + 4:position + 4 + length], ("127.0.0.1", port))
                position += 4 + length
                time.sleep(0.001)
        time.sleep(1)
    finally:
        collector.send_signal(signal.SIGTERM)
        collector.wait(20)
    return records(directory)
