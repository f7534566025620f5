"""What a guest scenario works with: its output folder, logged commands, the lab, the
tusk CLI and captures.

A scenario writes into a tmpfs folder (ctx.dir); the runner copies it to /out/<name>/
when the scenario ends, however it ends: 9p writes are slow, and a capture must not
wait on the host. commands.log there has every command, its exit status, time and
output, in order; captures.json how many packets the kernel dropped for each capture
(tcpdump's count: a capture that dropped some proves nothing about what is missing).
"""
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

from kit import time_scale
from pcaps import Capture

from lab.namespaces import SERVER_V4, Lab

TUSK = Path(__file__).resolve().parents[3] / "webui" / "bin" / "tusk"
LAB_PREFIX = "vm"
# Ethernet + IPv6 + TCP with 40 bytes of options: every header, no payload.
SNAPLEN = 128


class CommandFailed(Exception):
    pass


class Context:
    def __init__(self, name, directory):
        self.name = name
        self.dir = Path(directory)
        self._log = open(self.dir / "commands.log", "a", encoding="utf-8")
        self._captures = {}

    def run(self, *argv, ns=None, save=None, check=True, timeout=60, input=None):
        """Runs argv (in namespace ns) and logs it. save: a file name for its stdout,
        kept byte for byte (JSON, rulesets), instead of in the log. Raises
        CommandFailed on a non-zero exit status unless check is false."""
        full = ["ip", "netns", "exec", ns, *argv] if ns else list(argv)
        start = time.monotonic()
        try:
            timeout = timeout and timeout * time_scale()     # the guest's slowness (speed.py)
            result = subprocess.run(full, capture_output=True, text=True, timeout=timeout,
                                    input=input)
        except subprocess.TimeoutExpired as expired:
            self._record(full, f"killed after {timeout} s", time.monotonic() - start,
                         expired.stdout or "", expired.stderr or "")
            raise CommandFailed(f"{shlex.join(full)} did not finish in {timeout} s") from None
        seconds = time.monotonic() - start
        if save:
            self.save_text(save, result.stdout)
        self._record(full, f"exit {result.returncode}", seconds,
                     f"(saved as {save})" if save else result.stdout, result.stderr)
        if check and result.returncode != 0:
            raise CommandFailed(f"{shlex.join(full)} exited {result.returncode}:\n"
                                f"{result.stderr.strip() or result.stdout.strip()}")
        return result

    def _record(self, argv, outcome, seconds, stdout, stderr):
        self._log.write(f"$ {shlex.join(argv)}\n# {outcome} in {seconds:.2f} s\n")
        for label, text in (("stdout", stdout), ("stderr", stderr)):
            if text.strip():
                self._log.write(f"--- {label}\n{text.rstrip()}\n")
        self._log.flush()

    def save_text(self, name, text):
        (self.dir / name).write_text(text, encoding="utf-8")

    def save_json(self, name, data):
        self.save_text(name, json.dumps(data, indent=1, sort_keys=True) + "\n")

    def lab(self, **options):
        """The lab (tests/lab.py) up; the runner removes every namespace after the scenario."""
        return Lab(LAB_PREFIX, **options).up()

    def tusk(self, lab, *args, check=True):
        """The policy CLI as an operator runs it, on fw, with its history in this folder."""
        return self.run(sys.executable, str(TUSK), "policy", "--netns", lab.fw,
                        "--state-dir", str(self.dir / "tusk-state"), *map(str, args),
                        check=check)

    def capture(self, ns, interface, name, bpf="", snaplen=SNAPLEN):
        """tcpdump on ns's interface into <name>.pcap, returning once it is listening.
        Use it as a context manager: leaving it stops tcpdump."""
        capture = Capture(ns, interface, self.dir / f"{name}.pcap", bpf, snaplen)
        self._captures[name] = capture
        return capture

    def iperf3(self, lab, name, port, *client_args, seconds=60, server=SERVER_V4):
        """One iperf3 test client namespace -> server namespace through fw, its JSON
        reports saved as name-client.json and name-server.json; returns the client's.
        client_args: --time, --bytes, --reverse..."""
        with open(self.dir / f"{name}-server.json", "w") as report:
            iperf3_server = lab.popen(lab.server, "iperf3", "--server", "--one-off", "--json",
                                      "--port", str(port), stdout=report,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                self.wait_until(lambda: listening(lab, port), 30, f"iperf3 -s on port {port}")
                self.run("iperf3", "--client", server, "--port", str(port), "--json",
                         *client_args, ns=lab.client, save=f"{name}-client.json",
                         timeout=seconds + 60)
                iperf3_server.wait(30)
            finally:
                iperf3_server.kill()
                iperf3_server.wait()
        return json.loads((self.dir / f"{name}-client.json").read_text())

    def wait_until(self, predicate, seconds, what):
        """Polls predicate() until it is true; raises CommandFailed after `seconds`."""
        seconds *= time_scale()     # the guest's measured slowness (speed.py)
        deadline = time.monotonic() + seconds
        while not predicate():
            if time.monotonic() >= deadline:
                raise CommandFailed(f"timed out after {seconds} s waiting for {what}")
            time.sleep(0.05)

    def close(self):
        for capture in self._captures.values():
            capture.stop()
        if self._captures:
            self.save_json("captures.json", {name: {"dropped_by_kernel": capture.dropped}
                                             for name, capture in self._captures.items()})
        self._log.close()


def pair_policy(name, port, extra=""):
    """The Tusk policy of hapair.Pair's firewalls: class `name` accepts TCP to `port`
    from inside0 to outside0, with `extra` (", seqrand: both")."""
    return (f"version: 1\n"
            f"zones:\n"
            f"  - {{name: inside, interfaces: [inside0]}}\n"
            f"  - {{name: outside, interfaces: [outside0]}}\n"
            f"services:\n"
            f"  - {{name: {name}, protocol: tcp, ports: [{port}]}}\n"
            f"classes:\n"
            f"  - {{name: {name}, from: inside, to: outside, services: [{name}], "
            f"action: accept{extra}}}\n")


def pair_firewall(ctx, policy, prefix):
    """hapair.Pair's firewall hook for a pair of Tusk boxes: the policy file applied and
    confirmed with the tusk CLI in each firewall's namespace, each with its own state
    directory (<prefix>-<side>-tusk-state)."""
    def firewall(pair, side):
        state = ctx.dir / f"{prefix}-{side}-tusk-state"
        for args in (("apply", policy), ("confirm",)):
            ctx.run(sys.executable, str(TUSK), "policy", "--netns", pair.names[side],
                    "--state-dir", str(state), *map(str, args))
    return firewall


def listening(lab, port):
    """Whether a TCP socket listens on port in the server namespace."""
    found = lab.ns(lab.server, "ss", "-Hltn", f"sport = :{port}", check=False)
    return bool(found.stdout.strip())
