"""Chromium in a network namespace of its own, loopback only, reaching one TCP port of this
host's loopback through a relay.

Chromium watches the host's interfaces and aborts what is in flight when one changes
(net::ERR_NETWORK_CHANGED). `make test` runs the appliance's session beside the host
tiers, whose labs add and remove interfaces in the host's namespace all the time: a
navigation of the appliance's pages failed so in CI. In a namespace with nothing but
loopback, nothing ever changes under Chromium; the relay carries its connections to the
port (QEMU's forward of the appliance's HTTPS) as they are, TLS and all."""
import os
import shutil
import socket
import subprocess
import threading
from contextlib import contextmanager

from ha.core.peer import in_netns

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


class Relay:
    """Accepts on `listener` (a socket of the namespace) and joins each connection to a
    new one to 127.0.0.1:port here, byte for byte both ways."""

    def __init__(self, listener, port):
        self.listener = listener
        self.port = port
        self.sockets = []
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def _accept(self):
        while True:
            try:
                inside, _ = self.listener.accept()
            except OSError:          # closed by stop()
                return
            try:
                outside = socket.create_connection(("127.0.0.1", self.port), timeout=30)
            except OSError:
                inside.close()
                continue
            outside.settimeout(None)
            self.sockets += [inside, outside]
            for source, sink in ((inside, outside), (outside, inside)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source, sink):
        try:
            while data := source.recv(65536):
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            for end in (source, sink):
                end.close()

    def stop(self):
        self.listener.close()
        self.thread.join(5)
        for sock in self.sockets:
            sock.close()


@contextmanager
def chromium_alone(playwright, port, directory):
    """A headless Chromium (Playwright's Browser) in namespace tusk-chromium-<pid>, whose
    127.0.0.1:port is this host's. directory: where its launcher script goes."""
    if shutil.which("ip") is None or not os.path.exists(CHROMIUM):
        raise AssertionError("needs ip (iproute2) and Debian's chromium: run `make test`")
    name = f"tusk-chromium-{os.getpid()}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True)   # an earlier run's
    subprocess.run(["ip", "netns", "add", name], check=True)
    relay = None
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        relay = Relay(in_netns(name, lambda: socket.create_server(("127.0.0.1", port))),
                      port).start()
        launcher = directory / "chromium-alone"
        launcher.write_text(f'#!/bin/sh\nexec ip netns exec {name} {CHROMIUM} "$@"\n')
        launcher.chmod(0o755)
        browser = playwright.chromium.launch(executable_path=str(launcher), headless=True,
                                             args=ARGS)
        try:
            yield browser
        finally:
            browser.close()
    finally:
        if relay is not None:
            relay.stop()
        subprocess.run(["ip", "netns", "del", name], check=False)
