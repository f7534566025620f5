"""The image's firewall log off the image: its ulogd.conf (rootfs-overlay/usr/lib/tusk/
ulogd.conf) with the log directory moved, and ulogd run in a network namespace as
tusk-ulogd.service runs it (root, TZ=UTC, umask 027, the directory root:tusk 2750).
tools/tusk-lab runs it in the lab's fw namespace; the log tests of the netns and web
tiers run it in theirs, so what they exercise is the image's configuration."""
import grp
import os
import shutil
import subprocess
import time

from lab.paths import IMAGE_ULOGD_CONF
from lab.users import WEB_USER

IMAGE_LOG_DIR = "/var/lib/tusk/logs"
UMASK = 0o027
ENV = {"TZ": "UTC", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


def render_ulogd_conf(log_dir):
    """The image's ulogd.conf writing into log_dir instead of /var/lib/tusk/logs."""
    text = IMAGE_ULOGD_CONF.read_text()
    assert f'"{IMAGE_LOG_DIR}/' in text, f"{IMAGE_ULOGD_CONF} no longer writes {IMAGE_LOG_DIR}"
    return text.replace(f'"{IMAGE_LOG_DIR}/', f'"{log_dir}/')


def make_log_dir(path):
    """The log directory as tusk-ulogd.service makes it: root's, the web user's group,
    2750 (ulogd's files take that group by the set-group-id bit)."""
    os.makedirs(path, exist_ok=True)
    os.chown(path, 0, grp.getgrnam(WEB_USER).gr_gid)
    os.chmod(path, 0o2750)


def argv(netns, conf):
    return ["ip", "netns", "exec", netns, "ulogd", "-c", str(conf)]


def listening(netns, group=1):
    """Whether a process of netns has bound NFLOG group `group`."""
    table = subprocess.run(["ip", "netns", "exec", netns, "cat",
                            "/proc/net/netfilter/nfnetlink_log"],
                           capture_output=True, text=True).stdout
    return any(line.split()[:1] == [str(group)] for line in table.splitlines())


class Ulogd:
    """ulogd on the image's configuration in netns, writing into log_dir (made as the
    image makes it); its own output in log_dir/../ulogd.log."""

    def __init__(self, netns, log_dir):
        self.netns, self.log_dir = netns, log_dir
        self.conf = os.path.join(os.path.dirname(log_dir), "ulogd.conf")
        self.proc = None

    def start(self, seconds=10):
        if shutil.which("ulogd") is None:
            raise RuntimeError("missing: ulogd (Debian packages ulogd2 and ulogd2-json)")
        make_log_dir(self.log_dir)
        with open(self.conf, "w") as handle:
            handle.write(render_ulogd_conf(self.log_dir))
        with open(os.path.join(os.path.dirname(self.log_dir), "ulogd.log"), "ab") as out:
            self.proc = subprocess.Popen(argv(self.netns, self.conf), env=ENV, umask=UMASK,
                                         stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + seconds
        while not listening(self.netns):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"ulogd did not bind NFLOG group 1 in {self.netns} "
                                   f"(see {os.path.dirname(self.log_dir)}/ulogd.log)")
            time.sleep(0.05)
        return self

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
