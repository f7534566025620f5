"""nfdump's side of the flow export tests (issue 40): a capture file of nfcapd read back
as its JSON records, each with the observation domain (IPFIX) or source id (v9) of the
exporter that sent it - what `nfdump -E` lists for the record's export_sysid."""
import json
import shutil
import subprocess

import pytest


def need_nfdump():
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
