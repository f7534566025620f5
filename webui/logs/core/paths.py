"""Where the logs live, derived from the device configuration alone (never from a row):
beside the policy's state directory, in Tusk's state directory - /var/lib/tusk on the
appliance (/data/tusk), the lab's own directory under `make run` and the tests.

    <state>/logs     the log directory: ulogd writes, the agent rotates, the web reads
    <state>/syslog   the agent's (root only): rsyslog's configuration, pid and positions
"""
import os


def state_root(config):
    return os.path.dirname(os.path.abspath(config.state_dir))


def log_dir(config):
    return os.path.join(state_root(config), "logs")


def syslog_dir(config):
    return os.path.join(state_root(config), "syslog")
