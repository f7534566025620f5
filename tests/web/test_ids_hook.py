"""The IDS hook (issue 38) with the real agent and the kernel's nftables: an operate
token blocks a connection through the API, and the next packets of that connection are
dropped by the firewall (the agent's namespace routing between two peers) while another
connection goes on; the block ends by itself when its time is up, with nothing cleaned;
a prefix blocks both directions; a bad request is refused by name and queues nothing; a
forged row is checked again by the agent."""
import socket
import subprocess
import time

import pytest
from django.test import Client
from kit import wait_until
from netns.pcaps import ns_socket
from tuskweb import PEER_A, PEER_B, wait

from accounts import tokens
from accounts.models import AuditEntry
from flows.agent_jobs import HOOK
from flows.models import HookEntry
from jobs import queue
from jobs.models import Job


class Udp:
    """peer-a sending to peer-b from fixed ports; peer-b counting what arrives."""

    def __init__(self, peers):
        self.peers = peers
        self.receivers = {}

    def listen(self, port):
        sock = ns_socket(self.peers[1], socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((PEER_B, port))
        sock.settimeout(0.2)
        self.receivers[port] = sock

    def arrives(self, sport, dport, tries=5, payload=b"tusk"):
        """Whether a datagram (payload) from PEER_A:sport reaches PEER_B:dport."""
        sender = ns_socket(self.peers[0], socket.AF_INET, socket.SOCK_DGRAM)
        sender.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sender.bind((PEER_A, sport))
        try:
            for _ in range(tries):
                sender.sendto(payload, (PEER_B, dport))
                try:
                    self.receivers[dport].recvfrom(64)
                    return True
                except TimeoutError:
                    continue
            return False
        finally:
            sender.close()

    def close(self):
        for sock in self.receivers.values():
            sock.close()


@pytest.fixture
def udp(peers):
    found = Udp(peers)
    for port in (7001, 7002):
        found.listen(port)
    yield found
    found.close()


def test_a_block_drops_that_connection_only_until_its_time_is_up(agent, netns, udp,
                                                                 admin_user):
    token = {"HTTP_AUTHORIZATION": "Bearer " + tokens.create("suricata", "operate",
                                                              admin_user, 1)[1]}
    client = Client()
    assert udp.arrives(40001, 7001) and udp.arrives(40002, 7002)
    blocked = client.post("/api/v1/flows/block", {
        "flow": {"src": PEER_A, "dst": PEER_B, "protocol": "udp", "sport": 40001,
                 "dport": 7001}, "ttl": 6, "reason": "ET TEST signature 9000001"},
        content_type="application/json", **token)
    assert blocked.status_code == 202, blocked.content
    job = wait(Job.objects.get(pk=blocked.json()["job"]["id"]))
    assert job.state == "succeeded", job.error
    assert job.result["set"] == "block_flow4"
    started = time.monotonic()
    assert not udp.arrives(40001, 7001)             # that connection: dropped
    assert udp.arrives(40002, 7002)                 # another: goes on
    listed = client.get("/api/v1/flows/hooks", **token).json()
    assert [(h["action"], h["token"], h["reason"]) for h in listed] == \
        [("block", "suricata", "ET TEST signature 9000001")]
    wait_until(lambda: udp.arrives(40001, 7001, tries=1), 15,
               "the block ending by itself at its time to live")
    assert time.monotonic() - started >= 4
    assert AuditEntry.objects.filter(action="flow block", token="suricata").exists()


def test_a_prefix_block_drops_both_directions(agent, netns, udp, peers, admin_user):
    token = {"HTTP_AUTHORIZATION": "Bearer " + tokens.create("zeek", "operate",
                                                              admin_user, 1)[1]}
    blocked = Client().post("/api/v1/flows/block", {"prefix": f"{PEER_A}/32", "ttl": 60},
                            content_type="application/json", **token)
    wait(Job.objects.get(pk=blocked.json()["job"]["id"]))
    assert not udp.arrives(40003, 7002)
    reply = subprocess.run(["ip", "netns", "exec", peers[1], "ping", "-c", "1", "-W", "1",
                            PEER_A], capture_output=True)
    assert reply.returncode != 0                    # towards it too
    listing = subprocess.run(["ip", "netns", "exec", netns, "nft", "list", "set", "inet",
                              "tusk_hook", "block_net4"], capture_output=True, text=True)
    assert f"{PEER_A} " in listing.stdout and "expires" in listing.stdout


def test_bad_requests_are_refused_by_name_and_queue_nothing(db, admin_user):
    token = {"HTTP_AUTHORIZATION": "Bearer " + tokens.create("ids", "operate",
                                                              admin_user, 1)[1]}
    client = Client()
    for body, paths in (({"prefix": "10.0.0.1/8"}, {"prefix"}),
                        ({"prefix": "10.0.0.0/8", "flow": {"src": "10.0.0.1", "dst": "10.0.0.2",
                                                          "protocol": "tcp", "sport": 1,
                                                          "dport": 2}}, {""}),
                        ({"flow": {"src": "10.0.0.1", "dst": "::1", "protocol": "icmp",
                                   "sport": 1, "dport": 2}}, {"flow.dst", "flow.protocol"}),
                        ({"prefix": "10.0.0.0/8", "reason": "line\nbreak"}, {"reason"}),
                        # issue 39: a black-hole route is one host's
                        ({"prefix": "10.0.0.0/8", "announce": True}, {"announce"})):
        answer = client.post("/api/v1/flows/block", body, content_type="application/json",
                             **token)
        assert answer.status_code == 422, body
        assert {p["path"] for p in answer.json()["problems"]} == paths, answer.json()
    assert not Job.objects.exists() and not HookEntry.objects.exists()
    read = {"HTTP_AUTHORIZATION": "Bearer " + tokens.create("r", "read", admin_user, 1)[1]}
    assert client.post("/api/v1/flows/block", {"prefix": "10.0.0.0/8"},
                       content_type="application/json", **read).status_code == 403


def test_a_forged_hook_row_is_checked_again_by_the_agent(agent, netns):
    """Rows are the web user's to write: the agent checks the arguments with the API's
    own check, and an nft statement smuggled into a field never reaches nft."""
    for args in ({"action": "block", "prefix": "10.0.0.0/8 timeout 1s } ; flush ruleset ; {"},
                 {"action": "block", "prefix": "10.0.0.0/8", "ttl": 10 ** 9},
                 {"action": "drop", "prefix": "10.0.0.0/8"},
                 {"action": "bypass", "prefix": "10.0.0.1/32", "announce": True},
                 {"action": "block", "prefix": "10.0.0.1/32", "announce": "yes"},
                 # valid, but this box has no neighbour that takes black-hole routes:
                 # refused before the block, which would otherwise stand unannounced
                 {"action": "block", "prefix": "10.0.0.1/32", "announce": True}):
        job = wait(queue.enqueue(HOOK, args))
        assert job.state == "failed" and "nothing done" in job.error, job.error
    tables = subprocess.run(["ip", "netns", "exec", netns, "nft", "list", "tables"],
                            capture_output=True, text=True).stdout
    assert "tusk_hook" not in tables


def test_the_flows_page_lists_what_is_in_force(db, admin_client, admin_user):
    from accounts.audit import Actor
    from flows import services
    services.hook(Actor(admin_user, "192.0.2.5", "suricata"), "bypass", {
        "flow": {"src": "10.0.0.1", "dst": "10.0.9.9", "protocol": "tcp", "sport": 50000,
                 "dport": 2811}, "ttl": 300, "reason": "globus transfer <b>x</b>"})
    page = admin_client.get("/flows/").content.decode()
    assert 'data-action="bypass"' in page and "tcp 10.0.0.1:50000 -&gt; 10.0.9.9:2811" in page
    assert "globus transfer &lt;b&gt;x&lt;/b&gt;" in page and "token suricata" in page
    HookEntry.objects.update(expires_at="2000-01-01T00:00:00Z")
    assert 'id="hooks"' not in admin_client.get("/flows/").content.decode()


def test_the_flows_pages_block_form_queues_the_hooks_block(db, admin_client):
    """The Flows page's Block client... (issue 39: a block from the Flows page, announced
    as a black-hole route when asked): the API's own check, each problem at its field."""
    page = admin_client.get("/flows/block/?prefix=198.51.100.7/32").content.decode()
    assert 'value="198.51.100.7/32"' in page and "black-hole" in page
    answer = admin_client.post("/flows/block/", {"prefix": "198.51.100.0/24", "ttl": 60,
                                                 "reason": "", "announce": "on"})
    assert answer.status_code == 400
    assert "/32 or a /128" in " ".join(answer.context["form"].errors["announce"])
    answer = admin_client.post("/flows/block/", {"prefix": "198.51.100.7/8", "ttl": 60})
    assert answer.status_code == 400 and "host bits" in " ".join(
        answer.context["form"].errors["prefix"])
    assert not Job.objects.exists()
    answer = admin_client.post("/flows/block/", {"prefix": "198.51.100.7/32", "ttl": 60,
                                                 "reason": "scanner", "announce": "on"})
    assert answer.status_code == 302
    job = Job.objects.get(kind=HOOK)
    assert job.args["announce"] is True and job.args["prefix"] == "198.51.100.7/32"
    assert HookEntry.objects.get().reason == "scanner"
