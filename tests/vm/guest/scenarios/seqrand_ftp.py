"""seqrand-ftp: FTP through NAT with the FTP helper on the control connection and
its data connections randomised (both directions). The client reaches the server at
172.16.100.100 (DNAT) and leaves fw as 10.10.2.100 (SNAT), so the FTP helper rewrites
the server's PASV reply (10,10,2,2 -> 172,16,100,100: 5 bytes longer) and the client's
PORT command (10,10,1,2 -> 10,10,2,100: 2 bytes longer), moving the control
connection's sequence numbers through seqadj - the helper's own use of it - while the
data connections it expects get seqrand. A 2 MB file goes each way in passive and in
active mode; pyftpdlib serves, Python's ftplib is the client.

Saved: transfers.json (SHA-256 of each file sent and received), conntrack entries
while the data connections are still listed (TIME_WAIT), fw-*.pcap, after- state.
"""
import ftplib
import hashlib
import io
import os
import subprocess

import conntrack
import seqrand
from pcaps import netns
from scenario import listening

from lab.namespaces import SERVER_V4

TIME_LIMIT = 240
PUBLIC, SNAT_ADDRESS = "172.16.100.100", "10.10.2.100"
SIZE = 2 * 1024 * 1024
RULESET = f"""table inet lab {{
  ct helper ftp-alg {{
    type "ftp" protocol tcp
  }}
  ct helper randomise {{
    type "seqrand-bi" protocol tcp
    l3proto inet
  }}
  chain forward {{
    type filter hook forward priority filter; policy drop;
    ct state related ct helper set "randomise"
    ct state established,related accept
    ct state invalid counter drop
    iifname "veth-c" oifname "veth-s" tcp dport 21 ct helper set "ftp-alg" accept
  }}
}}
table ip lab_nat {{
  chain prerouting {{
    type nat hook prerouting priority dstnat; policy accept;
    ip daddr {PUBLIC} tcp dport 21 dnat to {SERVER_V4}
  }}
  chain postrouting {{
    type nat hook postrouting priority srcnat; policy accept;
    oifname "veth-s" snat to {SNAT_ADDRESS}
  }}
}}
"""


def run(ctx):
    lab = ctx.lab()
    seqrand.real_checksums(ctx, lab)
    ctx.run("ip", "addr", "add", f"{SNAT_ADDRESS}/32", "dev", "veth-s", ns=lab.fw)
    ctx.run("nft", "-f", "-", ns=lab.fw, input=RULESET)
    root = ctx.dir / "ftp-root"
    root.mkdir()
    with open(ctx.dir / "ftpd.log", "w") as log:
        server = lab.popen(lab.server, "python3", "-m", "pyftpdlib", "--port", "21",
                           "--interface", "0.0.0.0", "--directory", str(root), "--write",
                           stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            ctx.wait_until(lambda: listening(lab, 21), 30, "the FTP server")
            results = []
            with ctx.capture(lab.fw, "veth-c", "fw-inside", "tcp"), \
                    ctx.capture(lab.fw, "veth-s", "fw-outside", "tcp"):
                for passive in (True, False):
                    results.append(transfer_both_ways(lab, root, passive))
            ctx.save_json("transfers.json", results)
            ctx.save_json("conntrack.json", conntrack.entries(lab.fw))
        finally:
            server.kill()
            server.wait()
    ctx.run("nft", "list", "ruleset", ns=lab.fw, save="ruleset.txt")
    seqrand.save_state(ctx, lab, "after")


def transfer_both_ways(lab, root, passive):
    mode = "passive" if passive else "active"
    upload, download = os.urandom(SIZE), os.urandom(SIZE)
    (root / f"download-{mode}").write_bytes(download)
    received = io.BytesIO()
    # ftplib opens its sockets (and in active mode its listening one) in this thread
    with netns(lab.client):
        with ftplib.FTP(timeout=20) as ftp:
            ftp.connect(PUBLIC, 21)
            ftp.login()
            ftp.set_pasv(passive)
            ftp.storbinary(f"STOR upload-{mode}", io.BytesIO(upload))
            ftp.retrbinary(f"RETR download-{mode}", received.write)
    stored = (root / f"upload-{mode}").read_bytes()
    return {"mode": mode,
            "upload": [sha(upload), sha(stored)],
            "download": [sha(download), sha(received.getvalue())]}


def sha(data):
    return hashlib.sha256(data).hexdigest()
