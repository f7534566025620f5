"""The per-device configuration file (TOML) that the web process and the agent share.

    TUSK_CONFIG=/etc/tusk/tusk.toml   (the default path)

    [web]
    secret_key_file = "/var/lib/tusk/secret_key"   # required; created by first boot
    allowed_hosts = ["tusk.example.net"]          # required
    tls = true            # served over HTTPS (nginx): secure cookies, HSTS
    debug = false
    upload_max_mb = 1024  # largest pcap the Diagnostics page accepts for analysis
                          # (nginx's client_max_body_size for /diag/upload/ must allow it)
    bundle_max_mb = 2048  # largest update bundle the System page accepts (nginx's
                          # client_max_body_size for /system/upgrade/ must allow it)

    [database]            # PostgreSQL; host may be a socket directory
    name = "tusk"
    user = "tusk"
    host = "/run/postgresql"
    port = 5432
    password_file = ""    # optional: peer authentication needs none

    [agent]
    netns = ""            # lab mode: the network namespace the agent manages
    state_dir = "/var/lib/tusk/policy"
    network_state_dir = "/var/lib/tusk/network"   # the network's revisions (commit-confirm)
    ha_state_dir = "/var/lib/tusk/ha"   # the HA pair's revisions (commit-confirm)
    tuning_state_dir = "/var/lib/tusk/tuning"   # tusk-tune's state: what rollback restores
    capture_dir = "/var/lib/tusk/captures"  # packet captures and uploaded pcaps; group of
                          # the web user, mode 2770: the agent writes, the web reads/deletes
    capture_spool_dir = "/var/lib/tusk/capture-spool"  # root only (0700): dumpcap writes
                          # here, the agent moves finished files to capture_dir (the same
                          # file system: a link, never a copy)
    analysis_python = ""  # the Python the capture analysis runs as user tusk-analyze (it
                          # must reach it); empty: the agent's own
    capture_quota_mb = 2048   # all captures together; the oldest go first
    upgrade_dir = "/var/lib/tusk/upgrade"   # uploaded update bundles; group of the web
                          # user, mode 2770: the web writes, the agent takes them
    upgrade_spool_dir = "/var/lib/tusk/upgrade-spool"  # root only (0700): the agent's own
                          # copy of a bundle while RAUC checks and installs it
    rauc_conf = "/etc/rauc/system.conf"     # RAUC's: compatible and keyring of this box
    system_state_dir = "/var/lib/tusk/system"   # the slots' state, health and events
                          # (appliance/slots.py), which the System page shows
    sample_interval = 2   # seconds between statistics samples
    live_check_interval = 15  # seconds between comparisons of the live ruleset with
                              # what Tusk loaded (listing a big table costs nft CPU)
    web_url = ""          # the agent checks the web UI here (health), e.g.
                          # "http://127.0.0.1:8000/healthz/"; empty: not checked
    tls_certificate = ""  # the certificate nginx serves (PEM): the agent reads when it
                          # expires (/metrics); empty: not read

    [selftest]            # the Self-test page; empty client_netns: hardware mode (the
                          # operator names two hosts running the downloadable responder)
    client_netns = ""     # lab mode: the namespace the measuring client runs in
    server_netns = ""     # lab mode: the namespace the agent starts the responder in
    server_address = ""   # lab mode: the server's address through the firewall
    direct_address = ""   # lab mode: the server's address on a path around the
                          # firewall (the baseline); empty: no baseline
    port = 8009           # the responder's TCP port (the policy must let it through)

Every problem is reported with the file, the section and the key, and why.
"""
import ipaddress
import os
from dataclasses import dataclass

from . import tomlread

DEFAULT_PATH = "/etc/tusk/tusk.toml"


class ConfigError(Exception):
    pass


@dataclass(frozen=True)
class Config:
    path: str
    secret_key: str
    allowed_hosts: tuple
    tls: bool
    debug: bool
    upload_max_mb: int
    bundle_max_mb: int
    db_name: str
    db_user: str
    db_host: str
    db_port: int
    db_password: str
    netns: str
    state_dir: str
    network_state_dir: str
    ha_state_dir: str
    tuning_state_dir: str
    capture_dir: str
    capture_spool_dir: str
    analysis_python: str
    capture_quota_mb: int
    upgrade_dir: str
    upgrade_spool_dir: str
    rauc_conf: str
    system_state_dir: str
    sample_interval: float
    web_url: str
    tls_certificate: str
    live_check_interval: float
    selftest_client_netns: str
    selftest_server_netns: str
    selftest_server_address: str
    selftest_direct_address: str
    selftest_port: int


_SCHEMA = {
    "web": {"secret_key_file": (str, None), "allowed_hosts": (list, None), "tls": (bool, False),
            "debug": (bool, False), "upload_max_mb": (int, 1024),
            "bundle_max_mb": (int, 2048)},
    "database": {"name": (str, None), "user": (str, None), "host": (str, "/run/postgresql"),
                 "port": (int, 5432), "password_file": (str, "")},
    "agent": {"netns": (str, ""), "state_dir": (str, "/var/lib/tusk/policy"),
              "network_state_dir": (str, "/var/lib/tusk/network"),
              "ha_state_dir": (str, "/var/lib/tusk/ha"),
              "tuning_state_dir": (str, "/var/lib/tusk/tuning"),
              "capture_dir": (str, "/var/lib/tusk/captures"),
              "capture_spool_dir": (str, "/var/lib/tusk/capture-spool"),
              "analysis_python": (str, ""), "capture_quota_mb": (int, 2048),
              "upgrade_dir": (str, "/var/lib/tusk/upgrade"),
              "upgrade_spool_dir": (str, "/var/lib/tusk/upgrade-spool"),
              "rauc_conf": (str, "/etc/rauc/system.conf"),
              "system_state_dir": (str, "/var/lib/tusk/system"),
              "sample_interval": ((int, float), 2), "web_url": (str, ""),
              "tls_certificate": (str, ""), "live_check_interval": ((int, float), 15)},
    "selftest": {"client_netns": (str, ""), "server_netns": (str, ""),
                 "server_address": (str, ""), "direct_address": (str, ""), "port": (int, 8009)},
}


def _read_secret(path, where, what):
    """A relative path is relative to the configuration file's directory."""
    try:
        with open(path, encoding="utf-8") as handle:
            value = handle.read().strip()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read {what} {path}: {exc.strerror}") from None
    if not value:
        raise ConfigError(f"{where}: {what} {path} is empty")
    return value


def load(path=None):  # noqa: C901 - one check per section and key, each naming it
    path = path or os.environ.get("TUSK_CONFIG") or DEFAULT_PATH
    try:
        with open(path, "rb") as handle:
            data = tomlread.load_bytes(handle.read())
    except FileNotFoundError:
        raise ConfigError(f"{path}: the configuration file does not exist (set TUSK_CONFIG to "
                          "its path; `make run` writes one for the lab)") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except tomlread.TomlError as exc:
        raise ConfigError(f"{path}: {exc.described()}") from None
    values = {}
    for section, keys in _SCHEMA.items():
        table = data.get(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [{section}] must be a table")
        for key in table:
            if key not in keys:
                raise ConfigError(f"{path}: [{section}] {key}: unknown key (known: "
                                  f"{', '.join(sorted(keys))})")
        for key, (kind, default) in keys.items():
            where = f"{path}: [{section}] {key}"
            if key not in table:
                if default is None:
                    raise ConfigError(f"{where}: missing (required)")
                values[(section, key)] = default
                continue
            value = table[key]
            if isinstance(value, bool) and kind is not bool:
                raise ConfigError(f"{where}: expected {_kind_name(kind)}, got a boolean")
            if not isinstance(value, kind):
                raise ConfigError(f"{where}: expected {_kind_name(kind)}, got "
                                  f"{type(value).__name__}")
            values[(section, key)] = value
    for section in data:
        if section not in _SCHEMA:
            raise ConfigError(f"{path}: [{section}]: unknown section (known: "
                              f"{', '.join(_SCHEMA)})")
    hosts = values[("web", "allowed_hosts")]
    if not hosts or not all(isinstance(h, str) and h for h in hosts):
        raise ConfigError(f"{path}: [web] allowed_hosts: must be a non-empty list of host names")
    port = values[("database", "port")]
    if not 0 < port < 65536:
        raise ConfigError(f"{path}: [database] port: {port} is not a TCP port")
    quota = values[("agent", "capture_quota_mb")]
    if not 10 <= quota <= 10_000_000:
        raise ConfigError(f"{path}: [agent] capture_quota_mb: must be from 10 to 10000000 (MB), "
                          f"not {quota}")
    upload = values[("web", "upload_max_mb")]
    if not 1 <= upload <= 1_000_000:
        raise ConfigError(f"{path}: [web] upload_max_mb: must be from 1 to 1000000 (MB), "
                          f"not {upload}")
    bundle = values[("web", "bundle_max_mb")]
    if not 1 <= bundle <= 1_000_000:
        raise ConfigError(f"{path}: [web] bundle_max_mb: must be from 1 to 1000000 (MB), "
                          f"not {bundle}")
    interval = values[("agent", "sample_interval")]
    if not 0.2 <= interval <= 3600:
        raise ConfigError(f"{path}: [agent] sample_interval: {interval} is outside 0.2-3600 s")
    password_file = values[("database", "password_file")]
    _check_selftest(path, values)
    return Config(
        path=path,
        secret_key=_read_secret(_beside(path, values[("web", "secret_key_file")]),
                                f"{path}: [web] secret_key_file", "secret key file"),
        allowed_hosts=tuple(hosts),
        tls=values[("web", "tls")],
        debug=values[("web", "debug")],
        upload_max_mb=upload,
        bundle_max_mb=bundle,
        db_name=values[("database", "name")],
        db_user=values[("database", "user")],
        db_host=values[("database", "host")],
        db_port=port,
        db_password=(_read_secret(_beside(path, password_file), f"{path}: [database] password_file",
                                  "password file") if password_file else ""),
        netns=values[("agent", "netns")],
        state_dir=values[("agent", "state_dir")],
        network_state_dir=values[("agent", "network_state_dir")],
        ha_state_dir=values[("agent", "ha_state_dir")],
        tuning_state_dir=values[("agent", "tuning_state_dir")],
        capture_dir=values[("agent", "capture_dir")],
        capture_spool_dir=values[("agent", "capture_spool_dir")],
        analysis_python=values[("agent", "analysis_python")],
        capture_quota_mb=quota,
        upgrade_dir=values[("agent", "upgrade_dir")],
        upgrade_spool_dir=values[("agent", "upgrade_spool_dir")],
        rauc_conf=values[("agent", "rauc_conf")],
        system_state_dir=values[("agent", "system_state_dir")],
        sample_interval=float(interval),
        web_url=values[("agent", "web_url")],
        tls_certificate=values[("agent", "tls_certificate")],
        live_check_interval=float(values[("agent", "live_check_interval")]),
        selftest_client_netns=values[("selftest", "client_netns")],
        selftest_server_netns=values[("selftest", "server_netns")],
        selftest_server_address=values[("selftest", "server_address")],
        selftest_direct_address=values[("selftest", "direct_address")],
        selftest_port=values[("selftest", "port")],
    )


def _check_selftest(path, values):
    """Lab mode needs both namespaces and the server's address; addresses are IPs."""
    port = values[("selftest", "port")]
    if not 0 < port < 65536:
        raise ConfigError(f"{path}: [selftest] port: {port} is not a TCP port")
    lab = [values[("selftest", key)] for key in ("client_netns", "server_netns",
                                                 "server_address")]
    if any(lab) and not all(lab):
        missing = [key for key, value in zip(("client_netns", "server_netns", "server_address"),
                                             lab) if not value][0]
        raise ConfigError(f"{path}: [selftest] {missing}: missing (lab mode needs "
                          "client_netns, server_netns and server_address)")
    for key in ("server_address", "direct_address"):
        value = values[("selftest", key)]
        if value:
            try:
                ipaddress.ip_address(value)
            except ValueError:
                raise ConfigError(f"{path}: [selftest] {key}: {value!r} is not an IP address") \
                    from None


def _beside(config_path, path):
    return os.path.join(os.path.dirname(os.path.abspath(config_path)), path)


def _kind_name(kind):
    names = {str: "a string", bool: "true or false", int: "an integer", list: "a list"}
    if isinstance(kind, tuple):
        return "a number"
    return names[kind]
