"""tusk-boot data|firewall|ha|setup: the appliance's boot steps, each run by a systemd unit.

data      (tusk-data.service, before local-fs.target) mounts the persistent data
          partition (ext4 labelled TUSK_DATA) on /data, or a tmpfs when there is none (the
          live ISO: the box runs from RAM and says so), and lays it out: /data/etc/tusk
          (/etc/tusk links there), /data/tusk (/var/lib/tusk), /data/pgsql, /data/tls. A
          new data partition gets the default configuration and a new secret key.
firewall  (tusk-firewall.service, before network-pre.target: no interface is up yet)
          loads table inet tusk_host - the firewall's own input: the management interface
          may reach the dashboard, the others nothing; without a valid management
          interface, none (the console only) - and the last confirmed policy. If there is
          none, or the kernel refuses it, the fail-closed ruleset (forward: drop) is
          loaded instead, so the box never forwards what no confirmed policy allowed.
          Forwarding is off until then, and stays off if neither loads. The tables of
          policy/core/render_boot.py are loaded as an apply loads a policy: nft -c, then
          one nft -f, under the policy's lock (which Applier.boot holds too).
db        (tusk-db.service, before PostgreSQL starts) hands the database over between
          the releases of the two system slots (appliance/slots.py): a copy of the
          stopped cluster before a new release migrates it, restored when the old
          release boots again.
ha        (tusk-ha.service, after the firewall) writes keepalived's and conntrackd's
          files for an HA pair's ha.toml into /run/tusk/ha, where tusk-keepalived and
          tusk-conntrackd find them; without a pair, none, and both stay off (docs/HA.md).
setup     (tusk-setup.service, after tusk-db.service) creates the database role and
          database, migrates the schema, creates the admin with a one-time password on a
          new box (kept in /etc/tusk/initial-admin for the console menu) and the
          self-signed TLS certificate nginx serves.

Every step is idempotent: it runs at every boot and only does what is missing.
"""
import argparse
import grp
import ipaddress
import os
import pwd
import secrets
import socket
import subprocess
import sys

from appliance import network, slots
from box.appliers import HaApplier, SnmpApplier
from ha.core import config as ha_config
from ha.core import render as ha_render
from policy.core import render_boot
from policy.core.applier import Applier
from policy.core.errors import PolicyError
from snmp.core import config as snmp_config
from tusklib.files import write_atomically
from tusklib.names import FAMILY, HOST_TABLE, LOCKDOWN_TABLE, TABLE
from tusklib.target import Target

DATA = "/data"
DATA_LABEL = "TUSK_DATA"
LIB = "/usr/lib/tusk"
WEBUI = f"{LIB}/webui"
ETC = f"{DATA}/etc/tusk"
STATE = f"{DATA}/tusk"
PGDATA = f"{DATA}/pgsql"
TLS = f"{DATA}/tls"
WEB_USER = "tusk"
FORWARDING = ("net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding")
# What tusk-firewall wants the console menu to say (the dashboard answers nowhere...).
FIREWALL_WARNING = "/run/tusk-firewall.warning"
HOST, LOCKDOWN = f"table {FAMILY} {HOST_TABLE}", f"table {FAMILY} {LOCKDOWN_TABLE}"


def log(message):
    print(f"tusk-boot: {message}", flush=True)


def run(argv, check=True, **kwargs):
    return subprocess.run([str(a) for a in argv], check=check, text=True, **kwargs)


# -- data ------------------------------------------------------------------------------

def mounts(proc_mounts="/proc/mounts"):
    """(device, mount point, file system type) of every mount, in /proc/mounts order."""
    with open(proc_mounts, encoding="utf-8") as handle:
        return [(fields[0], fields[1].replace("\\040", " "), fields[2])
                for fields in (line.split() for line in handle) if len(fields) > 2]


def is_mounted(path, proc_mounts="/proc/mounts"):
    """The file system type mounted on path, or None."""
    return next((kind for _, point, kind in mounts(proc_mounts) if point == path), None)


def cmd_data(args):
    os.makedirs(DATA, exist_ok=True)
    if is_mounted(DATA):
        log(f"{DATA} is already mounted")
    else:
        found = run(["blkid", "-L", DATA_LABEL], check=False, capture_output=True)
        device = found.stdout.strip()
        if found.returncode == 0 and device:
            # -p: repair what is safe to repair unattended; 1 = errors corrected
            fsck = run(["e2fsck", "-p", device], check=False, capture_output=True)
            if fsck.returncode not in (0, 1):
                log(f"e2fsck {device} exited {fsck.returncode}: {fsck.stdout.strip()} "
                    f"{fsck.stderr.strip()}")
            run(["mount", "-o", "noatime", device, DATA])
            log(f"data partition {device} mounted on {DATA}")
        else:
            run(["mount", "-t", "tmpfs", "-o", "mode=0755,size=50%", "tusk-live", DATA])
            log(f"no partition labelled {DATA_LABEL}: running live, {DATA} is in RAM "
                "(install with tusk-install to keep the configuration)")
    lay_out()
    mount_esp()


def mount_esp():
    """The EFI system partition of an installed box on /efi: GRUB's A/B menu and its
    environment, which RAUC and tusk-boot health write."""
    if is_mounted(slots.ESP_MOUNT):
        return
    found = run(["blkid", "-L", slots.ESP_LABEL], check=False, capture_output=True)
    device = found.stdout.strip()
    if found.returncode != 0 or not device:
        return
    os.makedirs(slots.ESP_MOUNT, exist_ok=True)
    run(["mount", "-o", "noatime,umask=0077", device, slots.ESP_MOUNT])
    log(f"EFI system partition {device} mounted on {slots.ESP_MOUNT}")


def lay_out():
    web = grp.getgrnam(WEB_USER).gr_gid
    postgres = pwd.getpwnam("postgres")
    layout = [  # path, uid, gid, mode
        (f"{DATA}/etc", 0, 0, 0o755),
        (ETC, 0, web, 0o750),
        (f"{ETC}/tuning", 0, 0, 0o755),
        (STATE, 0, 0, 0o755),
        (f"{STATE}/policy", 0, 0, 0o700),
        (f"{STATE}/tuning", 0, 0, 0o700),
        (f"{STATE}/network", 0, 0, 0o700),
        (f"{STATE}/captures", 0, web, 0o2770),
        (f"{STATE}/capture-spool", 0, 0, 0o700),   # dumpcap's, until the agent moves them
        (f"{STATE}/logs", 0, web, 0o2750),          # ulogd's records, which the web UI reads
        (slots.SYSTEM_STATE, 0, 0, 0o755),          # the slots' health and events
        (f"{STATE}/rauc", 0, 0, 0o700),             # RAUC's data-directory (slot status)
        (f"{STATE}/upgrade", 0, web, 0o2770),       # bundles the web UI receives
        (f"{STATE}/upgrade-spool", 0, 0, 0o700),    # the agent's copy while RAUC installs
        (PGDATA, postgres.pw_uid, postgres.pw_gid, 0o700),
        (TLS, 0, 0, 0o700),
    ]
    for path, uid, gid, mode in layout:
        os.makedirs(path, exist_ok=True)
        os.chown(path, uid, gid)
        os.chmod(path, mode)
    config = f"{ETC}/tusk.toml"
    if not os.path.exists(config):
        with open(f"{LIB}/tusk.toml.default", encoding="utf-8") as handle:
            write_atomically(config, handle.read(), 0o640, owner=(0, web))
        log(f"new box: default configuration {config}")
    key = f"{ETC}/secret_key"
    if not os.path.exists(key):
        write_atomically(key, secrets.token_urlsafe(50) + "\n", 0o640, owner=(0, web))
    # A fail-closed box: what the firewall runs when no policy is confirmed (also after
    # the first apply on a new box rolls back). Rewritten every boot with this release's.
    write_atomically(f"{STATE}/policy/failsafe.nft", render_boot.failsafe(), 0o600,
                     owner=(0, 0))


# -- firewall ----------------------------------------------------------------------------

def network_config(path=f"{ETC}/network.toml"):
    """network.toml checked by tusk-net's own rules, or None: then the reason is logged
    and the dashboard answers on no interface (the console only) until the console menu
    assigns one."""
    try:
        return network.load(path)
    except network.NetworkError as error:
        log(f"no management interface: {error.problems[0]} (console menu, option 1)")
        return None


def management(path=f"{ETC}/network.toml", config=None):
    """The [management] port of network.toml (or of config, already read), or None,
    logged."""
    config = config or network_config(path)
    if config is None:
        return None
    if config.management is None:
        log("no management interface: no port has the role management (console menu, "
            "option 1)")
    return config.management


def set_forwarding(target, on):
    """IPv4 and IPv6 forwarding, in target's network namespace. Off (sysctl.d) from early
    boot until a forward ruleset is loaded: the kernel must not forward what no table
    has judged."""
    value = int(on)
    result = target.run(["sysctl", "-q", "-w"] + [f"{key}={value}" for key in FORWARDING])
    if not result.ok:
        log(f"setting forwarding to {value} failed: {result.stderr.strip()}")
    return result.ok


def load(applier, table, ruleset):
    """ruleset the way the applier loads a policy: nft -c, then one nft -f, under its lock.
    Returns whether it is loaded; when not, the log says which step refused table."""
    try:
        applier.check_and_load(ruleset)
    except PolicyError as error:
        log(f"{table} refused, nothing of it loaded: {error}")
        return False
    return True


def load_host_table(applier, mgmt, ha=None, routes=None, snmp=None):
    """table inet tusk_host for mgmt (an interface or None), an HA pair's ha (its
    HaConfig, or None), network.toml's routing (routes, or None) and the SNMP agent's
    prefixes (snmp: its SnmpConfig, or None); refused, for no
    interface, no pair and no routing; refused again, the lockdown table. Returns
    (whether the kernel refused a table, what the console must say: '' when management
    answers where network.toml says)."""
    unset = "" if mgmt else ("the dashboard answers on no interface: network.toml has no "
                             "valid management interface (option 1 assigns one; reboot to "
                             "apply)")
    if load(applier, HOST, render_boot.host(mgmt, ha, routes, snmp)):
        return False, unset
    if mgmt:
        log("trying again with the dashboard on no interface (the console only)")
        if load(applier, HOST, render_boot.host(None)):
            return True, (f"{HOST} was refused for the management interface: "
                          "the dashboard answers on no interface (journalctl -u tusk-firewall)")
    if load(applier, LOCKDOWN, render_boot.lockdown()):
        return True, (f"{HOST} was refused: nothing reaches the box but the "
                      "console (lockdown table; journalctl -u tusk-firewall)")
    return True, ("no host table could be loaded: the box's own ports are not filtered "
                  "(journalctl -u tusk-firewall)")


def load_forward_ruleset(applier):
    """The last confirmed policy, or else the fail-closed ruleset. Returns (whether the
    kernel refused something, whether one of them is loaded)."""
    try:
        revision = applier.boot()
    except PolicyError as error:
        log(f"{error}; loading the fail-closed ruleset instead")
        return True, load(applier, f"table {FAMILY} {TABLE} (fail-closed)",
                          render_boot.failsafe())
    if revision is None:
        log("no confirmed policy yet: nothing is forwarded (fail-closed ruleset)")
        return False, True
    log(f"policy revision {revision.id} loaded")
    try:
        _, missing = applier.attach_fastpath_devices()
    except PolicyError as error:
        log(f"the fast path's interfaces: {error}")
    else:
        if missing:
            when = "when it appears" if len(missing) == 1 else "when they appear"
            log(f"the fast path takes {', '.join(missing)} {when} (the agent adds it; "
                "until then its connections take the slow path)")
    return False, True


def load_firewall(target, network_path, state_dir, warning_path, ha_path=None,
                  snmp_path=None):
    """The boot step on target (Target(netns) in the tests): forwarding off, the host
    table, the forward ruleset, then forwarding on - only if a forward ruleset is
    loaded. Every table is loaded as the applier loads a policy, under the lock in
    state_dir. ha_path: an HA pair's ha.toml, whose sync and VRRP the host table admits
    (docs/HA.md); snmp_path: snmp.toml, whose prefixes it admits to SNMP. warning_path
    gets what the console menu must say, and is removed when all is as configured.
    Returns the exit status: 1 when the kernel refused anything."""
    set_forwarding(target, False)
    applier = Applier(state_dir, target.netns)
    config = network_config(network_path)   # read once: its management port and routing
    mgmt = management(config=config) if config else None
    ha, unusable = ha_config.enabled(ha_path) if ha_path else (None, None)
    if unusable:
        log(f"the HA pair's configuration cannot be used, this box runs alone: {unusable}")
    snmp, unusable_snmp = snmp_config.in_force(snmp_path) if snmp_path else (None, None)
    if unusable_snmp:
        log(f"the SNMP agent's configuration cannot be used, no SNMP: {unusable_snmp}")
    host_refused, warning = load_host_table(applier, mgmt and mgmt.name, ha,
                                            config.routing if config else None, snmp)
    if unusable:
        warning = "; ".join(filter(None, [warning, "ha.toml cannot be used: this box runs "
                                          "alone (journalctl -u tusk-firewall)"]))
    forward_refused, forward = load_forward_ruleset(applier)
    if forward:
        forward = set_forwarding(target, True)
    else:
        log("no forward ruleset is loaded: forwarding stays off")
        warning = "; ".join(filter(None, [warning, "no forward ruleset could be loaded: "
                                          "nothing is forwarded"]))
    if warning:
        log(f"WARNING: {warning}")
        write_atomically(warning_path, warning + "\n", 0o644)
    elif os.path.lexists(warning_path):
        os.unlink(warning_path)
    return 1 if host_refused or forward_refused or not forward else 0


def cmd_firewall(args):
    return load_firewall(Target(), f"{ETC}/network.toml", f"{STATE}/policy", FIREWALL_WARNING,
                         f"{ETC}/ha.toml", f"{ETC}/snmp.toml")


# -- the SNMP agent (docs/MONITORING.md) --------------------------------------------------

def write_snmp(state_dir):
    """snmpd's files for the confirmed snmp.toml into /run/tusk/snmp, where
    tusk-snmpd.service finds them (none, disabled or unusable - the firewall step said
    so -: none, and the unit's condition keeps snmpd off). A change still pending at
    power loss was never confirmed: it is dropped. -> 0."""
    applier = SnmpApplier(state_dir)
    dropped = applier.drop_pending("rolled back: the box restarted before it was confirmed")
    if dropped:
        log(f"SNMP: revision {dropped['revision']} was pending at restart: dropped")
    config, unusable = snmp_config.in_force(applier.config_path)
    try:
        running = applier.write_files(config)
    except snmp_config.SnmpError as error:
        log(f"SNMP: no agent: {error}")
        running = applier.write_files(snmp_config.OFF)
    if running:
        log(f"SNMP: snmpd configured in {applier.run_dir} for {len(config.users)} user(s)")
    elif unusable:
        log(f"SNMP: no agent: {unusable}")
    return 0


def cmd_snmp(args):
    return write_snmp(f"{STATE}/snmp")


# -- an HA pair (docs/HA.md) --------------------------------------------------------------

HA_RUN = "/run/tusk/ha"
TCP_LOOSE = "/proc/sys/net/netfilter/nf_conntrack_tcp_loose"


def write_ha(ha_path, network_path, state_dir=HA_RUN, tcp_loose=TCP_LOOSE):
    """keepalived's and conntrackd's files for ha.toml's pair into state_dir, where their
    units find them (no pair, or an unusable ha.toml - the firewall step said so - none:
    the units' conditions then keep both daemons off). A killed conntrackd's lock goes
    either way: it would refuse to start again. A pair's boxes never pick a TCP
    connection up in its middle (nf_conntrack_tcp_loose=0): that is the peer's sync's
    job, and a randomised connection picked up that way would stall. -> 0."""
    ha, _ = ha_config.enabled(ha_path)
    if ha is None:
        ha_render.write_files(None, state_dir)
        return 0
    try:
        links = network.load(network_path).links
    except network.NetworkError:
        links = ()
    ha_render.write_files(ha, state_dir, [a for link in links for a in link.addresses])
    with open(tcp_loose, "w", encoding="ascii") as handle:
        handle.write("0\n")
    if ha.cluster:
        log(f"HA cluster: this box shares the load; conntrackd configured in {state_dir}")
    else:
        log(f"HA pair: this box is the {ha.role}; keepalived and conntrackd configured in "
            f"{state_dir}")
    return 0


def cmd_ha(args):
    # a change still pending at power loss was never confirmed: what comes up is the
    # confirmed ha.toml, and the dashboard's record says so
    if HaApplier(f"{STATE}/ha").drop_pending("rolled back: the box started again before "
                                             "it was confirmed"):
        log("HA: a change pending at shutdown was rolled back")
    return write_ha(f"{ETC}/ha.toml", f"{ETC}/network.toml")


# -- setup -------------------------------------------------------------------------------

def psql(sql, database="postgres"):
    return run(["runuser", "-u", "postgres", "--", "psql", "-h", "/run/postgresql", "-X",
                "-v", "ON_ERROR_STOP=1", "-tAc", sql, database], capture_output=True).stdout


def manage(*argv):
    env = dict(os.environ, TUSK_CONFIG=f"{ETC}/tusk.toml", DJANGO_SETTINGS_MODULE="tusk.settings")
    return run([sys.executable, f"{WEBUI}/manage.py", *argv], env=env, cwd=WEBUI,
               capture_output=True)


def cmd_setup(args):
    if not psql("SELECT 1 FROM pg_roles WHERE rolname = 'tusk'").strip():
        psql("CREATE ROLE tusk LOGIN")
        log("database role tusk created")
    if not psql("SELECT 1 FROM pg_database WHERE datname = 'tusk'").strip():
        psql("CREATE DATABASE tusk OWNER tusk ENCODING 'UTF8' TEMPLATE template0")
        log("database tusk created")
    # Django's system checks are half of what a migrate with nothing to do costs at every
    # boot (0.9 of 1.7 s of CPU, measured on a PC): they import every view and template
    # tag. They hold for the release, not the box: the tests run them on every change
    # (tests/unit/test_django_project.py).
    manage("migrate", "--no-input", "-v", "0", "--skip-checks")
    initial = f"{ETC}/initial-admin"
    if psql("SELECT count(*) FROM auth_user", database="tusk").strip() == "0":
        line = manage("tusk_admin", "admin").stdout.strip()
        password = line.rsplit(" ", 1)[-1]
        write_atomically(initial, f"admin {password}\n", 0o600, owner=(0, 0))
        log(f"new box: admin created with a one-time password (in {initial}, shown by "
            "the console menu)")
    certificate()


def certificate():
    crt, key = f"{TLS}/tusk.crt", f"{TLS}/tusk.key"
    if os.path.exists(crt) and os.path.exists(key):
        return
    name = socket.gethostname() or "tusk"
    names = [f"DNS:{name}", "DNS:localhost", "IP:127.0.0.1"]
    mgmt = management()
    for address in mgmt.addresses if mgmt else ():
        names.append(f"IP:{ipaddress.ip_interface(address).ip}")
    run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "3650", "-subj", f"/CN={name}/O=Tusk firewall",
         "-addext", "subjectAltName=" + ",".join(names),
         "-keyout", f"{key}.tmp", "-out", f"{crt}.tmp"], capture_output=True)
    os.chmod(f"{key}.tmp", 0o600)
    os.replace(f"{key}.tmp", key)
    os.replace(f"{crt}.tmp", crt)
    log(f"self-signed TLS certificate for {', '.join(names)} in {crt}")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tusk-boot", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    sub.add_parser("data", help="mount and lay out /data").set_defaults(func=cmd_data)
    sub.add_parser("firewall", help="load the host table and the last confirmed policy") \
        .set_defaults(func=cmd_firewall)
    sub.add_parser("setup", help="database, schema, admin, TLS certificate") \
        .set_defaults(func=cmd_setup)
    sub.add_parser("ha", help="configure keepalived and conntrackd for an HA pair") \
        .set_defaults(func=cmd_ha)
    sub.add_parser("snmp", help="configure snmpd for the SNMP agent") \
        .set_defaults(func=cmd_snmp)
    sub.add_parser("db", help="hand the database over between the slots' releases") \
        .set_defaults(func=lambda args: slots.hand_over_database() and 0)
    sub.add_parser("health", help="check the booted slot; mark it good or fall back") \
        .set_defaults(func=lambda args: slots.health(manage))
    slot_parser = sub.add_parser("slots", help="show the system slots (--once: boot the "
                                 "other one next, once)")
    slot_parser.add_argument("--once", action="store_true")
    slot_parser.set_defaults(func=lambda args: slots.cmd_slots(args.once))
    args = parser.parse_args(argv)
    try:
        return args.func(args) or 0
    except subprocess.CalledProcessError as exc:
        log(f"{' '.join(exc.cmd)} exited {exc.returncode}: {(exc.stderr or '').strip()}")
        return 1
