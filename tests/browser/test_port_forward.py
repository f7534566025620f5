"""A port forward in Chromium, as an operator makes one: the forward with "create a class
for it", Review and apply, Confirm; then a connection from the lab's client namespace to
fw's address and the external port reaches a listener in the server namespace, on the
server's port, from the client's own address (DNAT only). Before the apply the same
connection is refused or dropped, so the test cannot pass without the forward.

The steps are functions (add_port_forward, apply_and_confirm, connect) for later tests to
build on: the flows page and diagnosis of a forwarded connection start from here."""
import re
import subprocess
import time

from playwright.sync_api import expect
from tuskweb import BROWSER_LAB as LAB_NAME

from lab.namespaces import CLIENT_V4, FW_C_V4, SERVER_V4

CLIENT, FW, SERVER = (f"{LAB_NAME}-client", f"{LAB_NAME}-fw", f"{LAB_NAME}-server")
EXTERNAL_PORT, SERVER_PORT = 9090, 8080
CREATE_CLASS = "+create"

# In the server namespace: accept one connection at a time and answer with the peer's
# address, as the server sees it.
LISTENER = """
import socket, sys
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("0.0.0.0", int(sys.argv[1])))
server.listen()
print("listening", flush=True)
while True:
    conn, peer = server.accept()
    conn.sendall(f"tusk-server saw {peer[0]}\\n".encode())
    conn.close()
"""
CONNECT = """
import socket, sys
with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3) as conn:
    print(conn.makefile().readline().strip())
"""


def add_port_forward(page, name, from_zone, ports, to_address, to_ports="", address="",
                     protocol="tcp", admit=CREATE_CLASS):
    """Policy > NAT > Add port forward, saved to the draft; returns the page's message
    (which says where a created class went)."""
    page.click("header >> text=Policy")
    page.click("h2 >> text=NAT")
    expect(page.locator("#nat-explained")).to_contain_text(
        "translates the destination before the classes")
    page.click("text=Add port forward")
    page.fill("#id_name", name)
    page.select_option("#id_from_zone", from_zone)
    page.fill("#id_address", address)
    page.select_option("#id_protocol", protocol)
    page.fill("#id_ports", str(ports))
    page.fill("#id_to_address", to_address)
    page.fill("#id_to_ports", str(to_ports))
    page.select_option("#id_admit", admit)
    page.click("form#item-form button[type=submit]")
    expect(page.locator(f"#forwards tr[data-forward={name}]")).to_be_visible()
    return page.locator(".messages").inner_text()


def apply_and_confirm(page, timeout=120):
    """Review and apply the draft, then Confirm; returns the diff shown first."""
    page.click("header >> text=Policy")
    page.click("text=Review and apply…")
    diff = page.locator("#diff").inner_text()
    page.fill("#id_timeout", str(timeout))
    page.click("button:has-text('Apply')")
    expect(page.locator("#countdown")).to_be_visible()   # the job page leads to the status
    page.click("#confirm")
    expect(page.locator("#policy-status")).to_contain_text("is confirmed and live")
    return diff


def connect(address, port):
    """A TCP connection from the client namespace: the server's answer, or None."""
    result = subprocess.run(["ip", "netns", "exec", CLIENT, "python3", "-c", CONNECT,
                             address, str(port)], capture_output=True, text=True, timeout=30)
    return result.stdout.strip() if result.returncode == 0 else None


def listen(port):
    """The listener in the server namespace (a Popen: terminate it)."""
    listener = subprocess.Popen(["ip", "netns", "exec", SERVER, "python3", "-c", LISTENER,
                                 str(port)], stdout=subprocess.PIPE, text=True)
    assert listener.stdout.readline().strip() == "listening"
    return listener


def live_ruleset():
    return subprocess.run(["ip", "netns", "exec", FW, "nft", "list", "table", "inet", "tusk"],
                          capture_output=True, text=True, check=True).stdout


def test_a_port_forward_with_its_class_carries_a_connection(admin):
    page = admin
    listener = listen(SERVER_PORT)
    try:
        assert connect(SERVER_V4, SERVER_PORT) is None   # inside-rest rejects it
        assert connect(FW_C_V4, EXTERNAL_PORT) is None   # nothing forwards it yet
        message = add_port_forward(page, "e2e-web", "inside", EXTERNAL_PORT, SERVER_V4,
                                   to_ports=SERVER_PORT, address=FW_C_V4)
        # the example policy's catch-all rejects the rest from inside: the class goes first
        assert re.search(r"Created class e2e-web \(classes\[\d+\], before class inside-rest",
                         message), message
        diff = apply_and_confirm(page)
        assert "nat_prerouting" in diff and "e2e-web" in diff
        assert f"dnat ip to {SERVER_V4}:{SERVER_PORT}" in live_ruleset()
        answer = None
        deadline = time.monotonic() + 10
        while answer is None and time.monotonic() < deadline:
            answer = connect(FW_C_V4, EXTERNAL_PORT)
        assert answer == f"tusk-server saw {CLIENT_V4}"
        # the class matches the translated destination, so it admits the server's port
        # reached directly too; the firewall's own address forwards only the external port
        assert connect(SERVER_V4, SERVER_PORT) == f"tusk-server saw {CLIENT_V4}"
        assert connect(FW_C_V4, SERVER_PORT) is None
    finally:
        listener.terminate()
        listener.wait(timeout=10)


def iperf3(namespace, *args):
    return subprocess.Popen(["ip", "netns", "exec", namespace, "iperf3", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_the_forwarded_connection_is_on_the_flows_page_and_diagnosed(admin):
    """The forward's connection as the Flows page shows it - its class, its translation -
    and Diagnose on its row: a capture on both sides, then the health report."""
    page = admin
    if f"dnat ip to {SERVER_V4}:{SERVER_PORT}" not in live_ruleset():   # run alone
        add_port_forward(page, "e2e-web", "inside", EXTERNAL_PORT, SERVER_V4,
                         to_ports=SERVER_PORT, address=FW_C_V4)
        apply_and_confirm(page)
    server = iperf3(SERVER, "--server", "--one-off", "--port", str(SERVER_PORT))
    try:
        deadline = time.monotonic() + 10
        while subprocess.run(["ip", "netns", "exec", SERVER, "ss", "-Htln",
                              f"sport = :{SERVER_PORT}"], capture_output=True,
                             text=True).stdout == "":
            assert time.monotonic() < deadline, "iperf3 -s did not listen"
            time.sleep(0.1)
        client = iperf3(CLIENT, "--client", FW_C_V4, "--port", str(EXTERNAL_PORT),
                        "--time", "90", "--bitrate", "40M")
        try:
            page.click("header >> text=Flows")
            # iperf3's data connection: its control connection moves too little to rank
            row = page.locator(f"#flows-table tr.flow[data-dport='{EXTERNAL_PORT}']").first
            expect(row).to_be_visible(timeout=60_000)
            expect(row).to_contain_text(f"{CLIENT_V4}:")
            expect(row.locator("td.class")).to_have_text("e2e-web")
            expect(row.locator("td.nat")).to_contain_text(f"{SERVER_V4}:{SERVER_PORT}")
            row.locator("button.diagnose").click()
            expect(page).to_have_url(re.compile(r"/diag/reports/\d+/"), timeout=120_000)
            expect(page.locator("h1")).to_contain_text("TCP health report")
            expect(page.locator("table#flows")).to_contain_text(CLIENT_V4)
        finally:
            client.terminate()
            client.wait(timeout=10)
    finally:
        server.terminate()
        server.wait(timeout=10)
