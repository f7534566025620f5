"""The SNMP agent (issue 40, snmp/core/applier.py): snmp.toml applied by the applier in a
firewall's namespace, net-snmp's real snmpd started on the rendered file, asked by net-snmp's
snmpget/snmpwalk from a manager's namespace across a veth: SNMPv3 users answer with their
passphrases (authPriv) and with nothing else, the read-only community only from its own
prefix, nothing can be set, the view holds MIB-2 (IF-MIB, HOST-RESOURCES) and TUSK-MIB but
not the USM users; commit-confirm: an unconfirmed change goes back by itself, a confirmed
one stays, a passphrase left out is kept; and every file with a secret is root's alone -
the web user and snmpd's own user read none of them."""
import grp
import os
import pwd
import shutil
import subprocess
import sys
import time

import pytest
from kit import wait_until

from lab.users import SNMP_PROBE, SNMP_USER, WEB_USER, grant_search, reach_interpreter
from snmp.core import applier as applier_module
from snmp.core import config as snmp_config
from snmp.core import mib
from snmp.core.applier import CONF, CONFIG_NAME, PERSIST, SnmpApplier
from snmp.core.config import SnmpError
from tusklib.files import write_atomically

FW, MGR = f"tsn{os.getpid() % 100000}-fw", f"tsn{os.getpid() % 100000}-mg"
FW_IP, MGR_IP, OTHER_IP = "10.61.0.1", "10.61.0.2", "10.61.0.3"
SYS_LOCATION = ".1.3.6.1.2.1.1.6.0"
SYS_CONTACT = ".1.3.6.1.2.1.1.4.0"
IF_DESCR = ".1.3.6.1.2.1.2.2.1.2"
HR_UPTIME = ".1.3.6.1.2.1.25.1.1.0"
IF_HC_IN_OCTETS = ".1.3.6.1.2.1.31.1.1.1.6"
IP_ADDRESSES = ".1.3.6.1.2.1.4.20.1.1"
USM_USERS = ".1.3.6.1.6.3.15.1.2.2"
AUTH, PRIV = "auth:phrase-1", "priv:phrase-2"


def document(**snmp):
    return {"snmp": {"enabled": True, "location": 'Hall B, rack "4" \\ #7',
                     "contact": "noc@example.net", "allow": ["10.61.0.0/24"], **snmp},
            "user": [{"name": "noc", "auth": "SHA-512", "auth_passphrase": AUTH,
                      "privacy": "AES", "privacy_passphrase": PRIV}],
            "community": {"name": "read-only.1", "allow": [f"{MGR_IP}/32"]}}


def toml(doc):
    return snmp_config.to_toml(snmp_config.from_document(doc))


def ns(name, *argv, check=True):
    return subprocess.run(["ip", "netns", "exec", name, *argv], capture_output=True,
                          text=True, check=check, timeout=60)


def v3(*oids, user="noc", auth=AUTH, priv=PRIV, command="snmpget", timeout=2):
    return ns(MGR, command, "-v3", "-l", "authPriv", "-u", user, "-a", "SHA-512", "-A", auth,
              "-x", "AES", "-X", priv, "-On", "-t", str(timeout), "-r", "0", FW_IP, *oids,
              check=False)


def v2c(*oids, community="read-only.1", source=MGR_IP, command="snmpget"):
    return ns(MGR, command, "-v2c", "-c", community, "-On", "-t", "1", "-r", "0",
              f"--clientaddr={source}", FW_IP, *oids, check=False)


@pytest.fixture(scope="module")
def namespaces(system_users):
    problem = reach_interpreter(sys.executable, SNMP_USER, SNMP_PROBE)
    if problem:
        pytest.fail(problem)
    for name in (FW, MGR):
        subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "link", "add", "snmp-fw", "netns", FW, "type", "veth", "peer",
                        "name", "snmp-mg", "netns", MGR], check=True)
        for name, link, addresses in ((FW, "snmp-fw", [FW_IP]),
                                      (MGR, "snmp-mg", [MGR_IP, OTHER_IP])):
            ns(name, "ip", "link", "set", "lo", "up")
            ns(name, "ip", "link", "set", link, "up")
            for address in addresses:
                ns(name, "ip", "addr", "add", f"{address}/24", "dev", link, "nodad")
        yield
    finally:
        for name in (FW, MGR):
            subprocess.run(["ip", "netns", "pids", name], capture_output=True)
            subprocess.run(["ip", "netns", "del", name], capture_output=True)


@pytest.fixture
def applier(namespaces, tmp_path):
    # as the lab's /var/tmp/tusk-lab/NAME: snmpd's user may pass through to the run
    # directory inside the state directory (pytest's directories are root's, 0700)
    for parent in (*reversed(tmp_path.parents), tmp_path):
        grant_search(parent, SNMP_USER, "so that snmpd's user reaches the lab's counters")
    applier = SnmpApplier(str(tmp_path / "snmp"), netns=FW)
    yield applier
    if applier.store.pending():
        applier.cancel()
    applier.put(snmp_config.OFF)
    assert not applier.running()


def value(result):
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_users_and_the_community_answer_and_nothing_else_does(applier):
    applier.apply(toml(document()), timeout=600)
    applier.confirm()
    assert applier.running()
    found = value(v3(SYS_LOCATION, SYS_CONTACT, HR_UPTIME))
    assert f'{SYS_LOCATION} = STRING: "Hall B, rack \\"4\\" \\\\ #7"' in found
    assert f'{SYS_CONTACT} = STRING: "noc@example.net"' in found
    assert f"{HR_UPTIME} = Timeticks:" in found
    interfaces = value(v3(IF_DESCR, command="snmpwalk"))
    assert 'STRING: "snmp-fw"' in interfaces and 'STRING: "lo"' in interfaces
    # IF-MIB's 64-bit counters, IP-MIB's addresses: from snmpd itself
    assert "Counter64:" in value(v3(IF_HC_IN_OCTETS, command="snmpwalk"))
    assert f"IpAddress: {FW_IP}" in value(v3(IP_ADDRESSES, command="snmpwalk"))
    # wrong passphrases, an unknown user, noAuthNoPriv: refused
    assert "Authentication failure" in v3(SYS_LOCATION, auth="wrong-phrase").stderr
    assert v3(SYS_LOCATION, priv="wrong-phrase").returncode != 0
    assert "Unknown user name" in v3(SYS_LOCATION, user="root").stderr
    plain = ns(MGR, "snmpget", "-v3", "-l", "noAuthNoPriv", "-u", "noc", "-t", "1", "-r",
               "0", FW_IP, SYS_LOCATION, check=False)
    assert plain.returncode != 0 or "authorizationError" in plain.stdout + plain.stderr
    # the community from its prefix only; another community, v1: nothing
    assert "Hall B" in value(v2c(SYS_LOCATION))
    assert "Timeout" in v2c(SYS_LOCATION, source=OTHER_IP).stderr
    assert "Timeout" in v2c(SYS_LOCATION, community="public").stderr
    v1 = ns(MGR, "snmpget", "-v1", "-c", "read-only.1", "-t", "1", "-r", "0",
            f"--clientaddr={MGR_IP}", FW_IP, SYS_LOCATION, check=False)
    assert "Hall B" in v1.stdout, "rocommunity answers v1 and v2c alike, read-only"
    # nothing can be set, by anyone
    for setter in (["-v3", "-l", "authPriv", "-u", "noc", "-a", "SHA-512", "-A", AUTH,
                    "-x", "AES", "-X", PRIV], ["-v2c", "-c", "read-only.1"]):
        result = ns(MGR, "snmpset", *setter, "-t", "1", "-r", "0", f"--clientaddr={MGR_IP}",
                    FW_IP, SYS_LOCATION, "s", "pwned", check=False)
        assert result.returncode != 0, result.stdout
        assert "notWritable" in result.stderr or "noAccess" in result.stderr, result.stderr
    assert "Hall B" in value(v3(SYS_LOCATION))
    # the view: not the SNMP framework's tables (the USM users)
    walked = v3(USM_USERS, command="snmpwalk")
    assert walked.stdout.strip() == (f"{USM_USERS} = No more variables left in this MIB View "
                                     "(It is past the end of the MIB tree)"), walked.stdout


def test_an_unconfirmed_change_goes_back_by_itself_and_a_kept_passphrase_works(applier):
    applier.apply(toml(document()), timeout=600)
    applier.confirm()
    changed = document(location="Hall C")
    del changed["user"][0]["auth_passphrase"], changed["user"][0]["privacy_passphrase"]
    del changed["community"]["name"]
    applier.apply(toml(changed), timeout=10)
    assert "Hall C" in value(v3(SYS_LOCATION)), "the passphrases in force are kept"
    assert "Hall C" in value(v2c(SYS_LOCATION)), "so is the community"
    wait_until(lambda: applier.store.pending() is None, 30, "the watchdog's rollback")
    wait_until(lambda: applier.running() and "Hall B" in v3(SYS_LOCATION).stdout, 20,
               lambda: f"Hall B back: {v3(SYS_LOCATION)}")
    # a new user without a passphrase has none to keep: refused, nothing changed
    new = document()
    new["user"].append({"name": "ops", "auth": "SHA-256"})
    with pytest.raises(SnmpError) as refused:
        applier.apply(toml(new), timeout=600)
    assert [p.path for p in refused.value.problems] == ["user[1].auth_passphrase",
                                                        "user[1].privacy_passphrase"]
    assert applier.store.pending() is None and "Hall B" in value(v3(SYS_LOCATION))


def test_snmpds_saved_state_is_emptied_only_while_no_snmpd_runs(applier, monkeypatch):
    """snmpd writes its pid file before it saves its state into the persist directory at
    start (and saves again at exit), so a change applied while one still starts emptied the
    directory under its writes (CI: FileExistsError when it was made anew). The race
    forced: every emptying of it is checked for a live snmpd."""
    emptied = []
    real = shutil.rmtree

    def rmtree(path, *args, **kwargs):
        if os.path.basename(path) == PERSIST:
            emptied.append(applier.running())
        return real(path, *args, **kwargs)
    monkeypatch.setattr(applier_module.shutil, "rmtree", rmtree)
    applier.apply(toml(document()), timeout=600)
    applier.confirm()
    applier.apply(toml(document(location="Hall C")), timeout=600)
    applier.confirm()
    assert "Hall C" in value(v3(SYS_LOCATION))
    assert emptied and not any(emptied), f"emptied while snmpd ran: {emptied}"


def test_off_stops_snmpd_and_a_failed_start_restores(applier):
    applier.apply(toml(document()), timeout=600)
    applier.confirm()
    off = document(enabled=False)
    applier.apply(toml(off), timeout=600)
    assert not applier.running()
    assert "Timeout" in v3(SYS_LOCATION, timeout=1).stderr
    applier.cancel()
    assert applier.running() and "Hall B" in value(v3(SYS_LOCATION))


def test_files_with_secrets_are_roots_alone(applier):
    applier.apply(toml(document()), timeout=600)
    applier.confirm()
    pending = applier.apply(toml(document(location="Hall D")), timeout=600)
    secrets = [os.path.join(applier.run_dir, CONF), applier.config_path,
               os.path.join(pending.path, CONFIG_NAME)]
    for path in secrets:
        with open(path, encoding="utf-8") as handle:
            assert AUTH in handle.read(), path
        stat = os.stat(path)
        assert (stat.st_uid, stat.st_mode & 0o077) == (0, 0), path
    assert os.stat(applier.store.state_dir).st_mode & 0o066 == 0, "no one lists it"
    for user in (WEB_USER, SNMP_USER):
        for path in secrets:
            read = subprocess.run(["runuser", "-u", user, "--", "cat", path],
                                  capture_output=True, text=True)
            assert read.returncode != 0 and AUTH not in read.stdout, (user, path)
    # snmpd runs as its own user after binding, and so does its pass_persist
    pid = int(open(os.path.join(applier.run_dir, "snmpd.pid")).read())
    with open(f"/proc/{pid}/status") as handle:
        uids = next(line for line in handle if line.startswith("Uid:")).split()[1:]
    assert set(uids) == {str(pwd.getpwnam(SNMP_USER).pw_uid)}
    # the persistent directory (localized keys at exit) is emptied at each start
    persist = os.path.join(applier.run_dir, "persist")
    assert os.stat(persist).st_uid == pwd.getpwnam(SNMP_USER).pw_uid
    applier.cancel()


def test_tusks_counters_answer_through_snmpd_as_its_own_user(applier):
    """TUSK-MIB through the rendered pass_persist line: tusk-snmp-pass, run by snmpd as
    tusk-snmp, reads the counters the agent writes (root's, group tusk-snmp, 0640)."""
    applier.apply(toml(document()), timeout=600)
    applier.confirm()
    snapshot = {"version": mib.VERSION, "time": time.time(), "ha_role": "master",
                "ruleset_loaded": True, "conntrack_entries": 42, "conntrack_limit": 262144,
                "classes": [["bulk-copy", 7, 123456789012345]],
                "loss": [["nic.rx_missed", "nic.rx_missed@eth0", 3]]}
    gid = grp.getgrnam(SNMP_USER).gr_gid
    write_atomically(applier.counters_path, mib.snapshot_text(snapshot), 0o640, owner=(0, gid))
    root = "." + ".".join(map(str, mib.ROOT))
    walked = value(v3(root, command="snmpwalk"))
    rows = mib.table(snapshot)
    answers = [line for line in walked.splitlines() if "No more variables" not in line]
    assert len(answers) == len(rows), walked
    assert 'STRING: "bulk-copy"' in walked and "Counter64: 123456789012345" in walked
    assert "Gauge32: 42" in walked and 'STRING: "nic.rx_missed@eth0"' in walked
    assert "bulk-copy" in value(v2c(root, command="snmpwalk"))
    pids = subprocess.run(["pgrep", "-f", "tusk-snmp-pass"], capture_output=True,
                          text=True).stdout.split()
    owners = {os.stat(f"/proc/{pid}").st_uid for pid in pids if os.path.exists(f"/proc/{pid}")}
    assert owners == {pwd.getpwnam(SNMP_USER).pw_uid}, owners
