"""The appliance under QEMU: Tusk's kernel, a root filesystem laid out like the image
(tools/build-appliance-rootfs), systemd, a management NIC (QEMU user networking, its
HTTPS port forwarded to the host's loopback), two traffic NICs and disks - driven as an
operator would: over the serial console (the console menu) and HTTPS (the web UI).
"""
import codecs
import http.cookiejar
import json
import re
import shlex
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import vm

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")
# (the firewall's traffic NIC's PCI slot, its peer's): ensN is the NIC in slot N
# a wait past its timeout goes on while the console speaks (overdue()), up to x4
QUIET_SECONDS = 30
MAX_STRETCH = 4
WIRES = ((0x4, 0x10), (0x5, 0x11), (0xc, 0x12), (0xd, 0x13), (0xe, 0x14))


def free_port(kind=socket.SOCK_STREAM):
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Appliance:
    """One boot. disks: [(path, format, readonly)] in PCI order -> vda, vdb, ...
    kernel: boot it directly (the live system: root=/dev/vda); None: the firmware boots
    the first disk (an installed system), or the ISO. iso: (path, "cd" or "usb"): the ISO
    in a CD drive, or as a USB stick it was written to, which the firmware boots first
    (the live system from RAM). firmware: None (SeaBIOS) or an OVMF code file. share: a
    host directory the guest may mount read-only (mount -t 9p -o trans=virtio share
    /mnt), as an operator's USB stick with update bundles. Every boot has QEMU's
    i6300esb watchdog, which resets (here: ends) a system that hangs."""

    def __init__(self, name, disks, log_dir, kernel=None, append="", firmware=None,
                 memory_mb=3072, cpus=2, iso=None, share=None):
        self.name = name
        self.https_port = free_port()
        self.log_path = Path(log_dir) / f"appliance-{name}.log"
        self.buffer = ""
        self.seen = 0           # how far expect() has consumed the buffer
        self.lock = threading.Lock()
        self.last_output = time.monotonic()     # when the console last said something
        argv = [vm.QEMU, "-accel", "tcg", "-machine", "pc",
                "-m", str(memory_mb), "-smp", str(cpus), "-display", "none",
                "-serial", "stdio", "-monitor", "none", "-no-reboot"]
        if firmware:
            vars_copy = Path(log_dir) / f"appliance-{name}-vars.fd"
            shutil.copy(firmware["vars"], vars_copy)
            argv += ["-drive", f"if=pflash,format=raw,readonly=on,file={firmware['code']}",
                     "-drive", f"if=pflash,format=raw,file={vars_copy}"]
        if kernel:
            argv += ["-kernel", str(kernel), "-append",
                     f"root=/dev/vda rw console=ttyS0,115200 no_timer_check bonding.max_bonds=0 "
                     f"{append}".strip()]   # as the ISO's boot entry (post-image.sh)
        # management: ens3, HTTPS forwarded. Traffic: ens4, ens5, ens12, ens13, ens14,
        # each wired to a NIC of the same VM - ens16 to ens20 - that the tests move into network
        # namespaces standing in for the networks beside the firewall. A wire is a pair
        # of UDP sockets on loopback, not a QEMU hub: a hub holds a frame until every
        # other port can take it, so while ens16 is down (before the tests set it up)
        # ens4's transmit queue stalls, and the kernel's watchdog floods the console
        # the tests read. Over UDP a frame nobody takes is dropped, as on a cable.
        # No option ROMs: the firmware boots the disk, never the network.
        nic = "virtio-net-pci,romfile=,speed=1000,duplex=full,netdev={},addr={:#x}"
        argv += ["-netdev", f"user,id=mgmt,hostfwd=tcp:127.0.0.1:{self.https_port}-:443",
                 "-device", nic.format("mgmt", 0x3)]
        for slot, peer in WIRES:
            ends = {slot: free_port(socket.SOCK_DGRAM), peer: free_port(socket.SOCK_DGRAM)}
            for this, other in ((slot, peer), (peer, slot)):
                argv += ["-netdev", f"dgram,id=n{this},"
                         f"local.type=inet,local.host=127.0.0.1,local.port={ends[this]},"
                         f"remote.type=inet,remote.host=127.0.0.1,remote.port={ends[other]}",
                         "-device", nic.format(f"n{this}", this)]
        if iso:
            path, how = iso
            # what a burned CD or a dd'd stick is: the file as it is; never written
            if how == "cd":
                argv += ["-drive", f"file={path},format=raw,if=none,id=iso,media=cdrom,"
                         "readonly=on", "-device", "ide-cd,drive=iso,bus=ide.1,bootindex=0"]
            else:
                argv += ["-drive", f"file={path},format=raw,if=none,id=iso,snapshot=on",
                         "-device", "qemu-xhci,addr=0x1e",
                         "-device", "usb-storage,drive=iso,bootindex=0"]
        for index, (path, fmt, readonly) in enumerate(disks):
            argv += ["-drive", f"file={path},format={fmt},if=none,id=d{index}"
                     + (",readonly=on" if readonly else ""),
                     "-device", f"virtio-blk-pci,drive=d{index},addr={0x6 + index:#x}"]
            if index == 0 and not kernel and not iso:
                argv[-1] += ",bootindex=0"
        if share:
            argv += ["-virtfs", f"local,path={share},mount_tag=share,security_model=none,"
                     "readonly=on"]
        argv += ["-device", "i6300esb", "-action", "watchdog=reset"]
        # How a boot ended, when QEMU exits unasked (a reset under -no-reboot looks like a
        # power-off): QEMU's own events - WATCHDOG (the i6300esb fired), RESET, SHUTDOWN
        # and its reason - with the host's time, in appliance-<name>-qmp.log.
        self.qmp_dir = tempfile.mkdtemp(prefix="tusk-qmp-")
        qmp_socket = f"{self.qmp_dir}/qmp.sock"
        argv += ["-chardev", f"socket,id=qmp,path={qmp_socket},server=on,wait=off",
                 "-mon", "chardev=qmp,mode=control"]
        # The guest's kernel messages and a record of its state (record() starts it), off
        # the console the tests read: a second serial port (ttyS1), into a file
        self.record_path = Path(log_dir) / f"appliance-{name}-record.log"
        self.recording = False
        argv += ["-serial", f"file:{self.record_path}"]
        self.argv = argv
        self.log = open(self.log_path, "w", encoding="utf-8", errors="replace")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.events = threading.Thread(target=self._events, args=(qmp_socket,), daemon=True)
        self.events.start()

    def _events(self, path):
        """QEMU's QMP events into appliance-<name>-qmp.log, each with the host's time."""
        events_path = self.log_path.with_name(f"appliance-{self.name}-qmp.log")
        with open(events_path, "w", encoding="utf-8") as out:
            def note(text):
                out.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {text}\n")
                out.flush()
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            for _ in range(600):
                try:
                    sock.connect(path)
                    break
                except OSError:
                    if self.proc.poll() is not None:
                        return
                    time.sleep(0.1)
            else:
                note("no QMP socket")
                return
            with sock, sock.makefile("rwb") as stream:
                stream.readline()                                   # the greeting
                stream.write(b'{"execute": "qmp_capabilities"}\n')
                stream.flush()
                note("QMP connected")
                for line in stream:
                    try:
                        message = json.loads(line)
                    except ValueError:
                        continue
                    if "event" in message:
                        note(f"{message['event']} {json.dumps(message.get('data', {}))}")
            note(f"QMP closed (QEMU exit status {self.proc.poll()})")

    def _read(self):
        # The serial line arrives in small reads: a UTF-8 character or an escape sequence
        # may be cut between two, so both are put together before they are cleaned.
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        partial = ""
        while True:
            chunk = self.proc.stdout.read1(65536)
            if not chunk:
                return
            text = decoder.decode(chunk)
            self.log.write(text)
            self.log.flush()
            text, partial = partial + text, ""
            cut = text.rfind("\x1b")
            if cut != -1 and len(text) - cut < 32 and not ANSI.match(text, cut):
                text, partial = text[:cut], text[cut:]
            with self.lock:
                self.buffer += ANSI.sub("", text)
                self.last_output = time.monotonic()

    # -- the serial console ------------------------------------------------------------

    def overdue(self, started, timeout):
        """Whether a wait begun at started is over: past timeout while the console has
        been quiet for QUIET_SECONDS, or past timeout x MAX_STRETCH whatever it says. A
        guest that keeps printing (a boot under way, slower on a busy host: its userspace
        took 7 minutes there, not 2) is slow, not stuck: its deadlines follow it."""
        now = time.monotonic()
        if now - started <= timeout:
            return False
        with self.lock:
            quiet = now - self.last_output
        return quiet > QUIET_SECONDS or now - started > timeout * MAX_STRETCH

    def expect(self, pattern, timeout):
        """Waits for pattern in the console output after what earlier calls consumed;
        returns the match. On timeout (overdue()) fails with the console's tail."""
        regex = re.compile(pattern)
        started = time.monotonic()
        while True:
            with self.lock:
                match = regex.search(self.buffer, self.seen)
                if match:
                    self.seen = match.end()
                    return match
            if self.proc.poll() is not None:
                raise AssertionError(f"QEMU ({self.name}) exited ({self.proc.returncode}) "
                                     f"waiting for {pattern!r}; console:\n{self.tail()}")
            if self.overdue(started, timeout):
                raise AssertionError(f"{pattern!r} not on the console of {self.name} within "
                                     f"{time.monotonic() - started:.0f} s (the console quiet "
                                     f"after {timeout} s); console ({self.log_path}):\n"
                                     f"{self.tail()}")
            time.sleep(0.1)

    def send(self, text):
        self.proc.stdin.write(text.encode())
        self.proc.stdin.flush()

    def tail(self, lines=40):
        with self.lock:
            return "\n".join(self.buffer.splitlines()[-lines:])

    # What record() runs in the guest, writing to ttyS1: the kernel's messages (the
    # console keeps them off: dmesg -n 1), the journal, and every 5 s the uptime, load,
    # free memory and PID 1's state and CPU time (systemd feeds the hardware watchdog from
    # its loop: a PID 1 that stops for a minute resets the box), every 30 s the busiest
    # processes.
    RECORDER = ("exec >/dev/ttyS1 2>&1; cat /dev/kmsg & "
                "journalctl -f -n 0 -o short-monotonic --no-pager & "
                "n=0; while :; do echo \"== $(cut -d' ' -f1 /proc/uptime) load $(cut -d' ' "
                "-f1-4 /proc/loadavg) pid1 $(cut -d' ' -f3,14,15 /proc/1/stat) $(grep -E "
                "'^(MemAvailable|Shmem):' /proc/meminfo | tr -s ' ' | tr '\\n' ' ')\"; "
                "[ $((n % 6)) -eq 0 ] && ps -eo pid,stat,time,rss,comm --sort=-time | head -12; "
                "n=$((n + 1)); sleep 5; done")

    def record(self):
        """Starts the recorder (RECORDER) in the guest, once a boot, from the console's
        shell: a transient unit of its own, outside the console's session."""
        if self.recording:
            return
        rc, output = self.shell("systemd-run --quiet --collect --unit=tusk-test-record "
                                f"sh -c {shlex.quote(self.RECORDER)}")
        assert rc == 0, f"the recorder did not start: {output}"
        self.recording = True

    def shell(self, command, timeout=120):
        """Runs command in the console menu's shell; returns (exit status, output)."""
        marker = f"T{time.monotonic_ns()}"
        self.send(f"{command}; echo {marker}-rc=$?\n")
        match = self.expect(rf"(?s)(.*?){marker}-rc=(\d+)", timeout)
        # what the command printed; the shell's prompts ("# ") around it dropped
        output = re.sub(r"^(# )+", "", match.group(1).lstrip("\n"))
        return int(match.group(2)), output

    def wait_exit(self, timeout):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.name} did not power off within {timeout} s; "
                                 f"console:\n{self.tail()}") from None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.qmp_dir, ignore_errors=True)

    # -- HTTPS -------------------------------------------------------------------------

    def base_url(self):
        return f"https://127.0.0.1:{self.https_port}"

    def wait_https(self, timeout):
        """Until the dashboard answers over HTTPS (the login page); a boot still printing
        on the console gets longer (overdue())."""
        started = time.monotonic()
        last = None
        while not self.overdue(started, timeout):
            if self.proc.poll() is not None:
                raise AssertionError(f"QEMU ({self.name}) exited; console:\n{self.tail()}")
            try:
                client = Web(self.base_url())
                status, body = client.get("/accounts/login/")
                if status == 200 and "csrfmiddlewaretoken" in body:
                    return client
                last = f"HTTP {status}"
            except OSError as exc:
                last = str(exc)
            time.sleep(3)
        raise AssertionError(f"no dashboard on {self.base_url()} within "
                             f"{time.monotonic() - started:.0f} s "
                             f"(last: {last}); console:\n{self.tail()}")

    def certificate(self):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        with socket.create_connection(("127.0.0.1", self.https_port), timeout=30) as raw:
            with context.wrap_socket(raw) as tls:
                return tls.getpeercert(binary_form=True), tls.version()


class Web:
    """A browser's HTTP side: cookies, CSRF tokens, redirects; no certificate check (the
    box's certificate is self-signed, checked separately)."""

    def __init__(self, base):
        self.base = base
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPSHandler(context=context),
            urllib.request.HTTPCookieProcessor(self.jar))

    def _open(self, request):
        try:
            with self.opener.open(request, timeout=180) as response:
                return response.status, response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode("utf-8", "replace")

    def get(self, path):
        return self._open(urllib.request.Request(self.base + path))

    def post(self, path, fields):
        """fields: {name: value, or a list of values (a multiple select)}."""
        token = next((c.value for c in self.jar if c.name == "csrftoken"), "")
        data = urllib.parse.urlencode({"csrfmiddlewaretoken": token, **fields},
                                      doseq=True).encode()
        request = urllib.request.Request(self.base + path, data=data,
                                         headers={"Referer": self.base + path})
        return self._open(request)

    def login(self, username, password):
        self.get("/accounts/login/")
        status, body = self.post("/accounts/login/", {"username": username, "password": password})
        return status, body


def hidden(body, name):
    match = re.search(rf'name="{name}" value="([^"]*)"', body)
    assert match, f"no hidden field {name} in the page"
    return match.group(1)

