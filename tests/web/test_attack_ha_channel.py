"""The real agent's HA channel under attack by someone who reaches TCP 3781 without the
pair key (issue 34): a thousand idle connections, headers a byte at a time, bodies of
15 MiB that are not signed, a signed request replayed. The agent answers its peer from
the same process that runs the jobs and the periodic tasks, so the claim is about the
agent: while the attack goes on, a queued job still completes and the periodic tasks
still report, and the listener holds a bounded number of threads, descriptors and bytes.
The agent's descriptors are limited to 1024 (systemd's default soft limit, the agent's
own before its unit set LimitNOFILE), as few as the attack needs to exhaust them when
the listener is not bounded.

And the pair key is part of the pair's revision: a new key rolled back - by Roll back or
by the confirm deadline - gives the old one back, and only a confirm keeps it."""
import json
import os
import resource
import socket
import threading
import time

import peerwire
import pytest
from habox import HA_KEY, HA_SYNC, ha_document
from kit import wait_until
from tuskweb import AGENT_NETNS, wait

from ha.core import peer as peers
from jobs import queue
from jobs.models import Job, PeriodicState

AGENT_IP = HA_SYNC[0].split("/")[0]
NOFILE = 1024
IDLE = 1100
CAP = 16          # the channel's policy: at most 16 connections at once
MIB = 1 << 20
# periodic tasks that run every sample_interval (0.5 s here) and never fail in this tier
WATCHED = ("agent.heartbeat", "ha.status", "ha.sync", "policy.sync", "network.sync")


def ask(peer_netns, key, method="GET", path="/v1/status", request=None):
    return peers.ask(AGENT_IP, key.encode(), method, path, request, netns=peer_netns,
                     timeout=3)


def answers(peer_netns, key=HA_KEY):
    try:
        return ask(peer_netns, key)[0] == 200
    except peers.PeerError:
        return False


def apply(key=None, timeout=3600, confirm=False):
    args = {"document": ha_document(), "timeout": timeout}
    if key is not None:
        args["key"] = key
    job = wait(queue.enqueue("ha.apply", args), 60)
    assert job.state == "succeeded", job.error
    if confirm:
        assert wait(queue.enqueue("ha.confirm"), 30).state == "succeeded"
    return job


@pytest.fixture
def channel(agent, ha_peer):
    """The agent's box in the pair, its half applied with the pair key: its channel
    answering on the sync address. The agent's descriptors limited to NOFILE. Yields the
    peer box's namespace, where the attacks come from."""
    apply(HA_KEY)
    wait_until(lambda: answers(ha_peer.netns), 30, "the agent's channel answering")
    resource.prlimit(agent.proc.pid, resource.RLIMIT_NOFILE, (NOFILE, NOFILE))
    return ha_peer.netns


class Watch:
    """The agent process's descriptors and threads, sampled every 0.1 s until stop():
    the most seen of each."""

    def __init__(self, pid):
        self.pid = pid
        self.most = {"fds": 0, "threads": 0}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def sample(self):
        fds = len(os.listdir(f"/proc/{self.pid}/fd"))
        threads = len(os.listdir(f"/proc/{self.pid}/task"))
        return {"fds": fds, "threads": threads}

    def _loop(self):
        while not self.stopping.wait(0.1):
            for name, value in self.sample().items():
                self.most[name] = max(self.most[name], value)

    def stop(self):
        self.stopping.set()
        self.thread.join(5)
        return self.most


def memory(pid, field):
    """/proc/<pid>/status's field (VmRSS, VmHWM) in bytes."""
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) << 10
    raise AssertionError(f"no {field} for {pid}")


def rows():
    return {row.name: row for row in PeriodicState.objects.filter(name__in=WATCHED)}


def still_working(seconds=60):
    """A queued job completes, and the watched periodic tasks run again, without a new
    failure."""
    before = rows()
    assert set(before) == set(WATCHED), before
    job = wait(queue.enqueue("tuning.plan", {"profile": "throughput"}), seconds)
    assert job.state == "succeeded", (job.state, job.error)
    wait_until(lambda: all(row.runs > before[name].runs for name, row in rows().items()),
               30, lambda: f"the periodic tasks running again ({rows()})")
    failed = {name: row.error for name, row in rows().items()
              if row.failures > before[name].failures}
    assert not failed, failed


def test_a_thousand_idle_connections_and_slow_headers_leave_jobs_and_tasks_running(
        agent, channel):
    watch = Watch(agent.proc.pid)
    baseline = watch.sample()
    flood = peerwire.Flood(channel, AGENT_IP, peers.PEER_PORT, IDLE).start()
    slow = []

    def dribble():
        """Headers a byte a second, on a connection opened again when it is cut."""
        def run():
            while not flood.stopping.is_set():
                try:
                    sock = socket.create_connection((AGENT_IP, peers.PEER_PORT), timeout=2)
                except OSError:
                    flood.stopping.wait(0.5)
                    continue
                with sock:
                    started = time.monotonic()
                    for byte in b"POST /v1/status HTTP/1.1\r\nX-Slow: " + b"a" * 100000:
                        if flood.stopping.is_set() or peerwire.closed_now(sock):
                            break
                        try:
                            sock.send(bytes([byte]))
                        except OSError:
                            break
                        flood.stopping.wait(1)
                    slow.append(time.monotonic() - started)
        peers.in_netns(channel, run)
    dribblers = [threading.Thread(target=dribble, daemon=True) for _ in range(4)]
    for thread in dribblers:
        thread.start()
    try:
        # the agent took them all: each connected, or closed by the agent
        wait_until(lambda: flood.connected + flood.closed >= IDLE, 90,
                   lambda: f"{IDLE} connections made (connected {flood.connected}, "
                   f"closed {flood.closed}, failed {flood.failed})")
        time.sleep(3)
        still_working()
        time.sleep(5)        # the dribblers reach the header deadline
        still_working()
    finally:
        flood.stop()
        for thread in dribblers:
            thread.join(10)
        most = watch.stop()
    # the listener's share: at most CAP connections and their threads
    assert most["fds"] <= baseline["fds"] + CAP + 20, (baseline, most)
    assert most["threads"] <= baseline["threads"] + CAP + 10, (baseline, most)
    assert flood.closed > IDLE - CAP, "the excess is closed at once, not held"
    assert slow and max(slow) < 5 + 3, slow
    wait_until(lambda: answers(channel), 10, "the peer answered again after the attack")


def test_huge_unsigned_bodies_are_never_read_and_the_agents_memory_stays_bounded(
        agent, channel):
    head, _ = peerwire.captured(AGENT_IP, AGENT_NETNS, channel, HA_KEY.encode(), "POST",
                                "/v1/policy", {"action": "cancel"})
    body = b"x" * (15 * MIB)
    head = peerwire.header(peerwire.unsigned(head), "Content-Length", str(len(body)))
    peak = memory(agent.proc.pid, "VmHWM")
    answered = []

    def send():
        def run():
            try:
                with socket.create_connection((AGENT_IP, peers.PEER_PORT), timeout=30) as sock:
                    sock.sendall(head + body)
                    answered.append(peerwire.answer_of(sock, 30))
            except (OSError, AssertionError) as error:   # cut off mid-body: refused
                answered.append(f"cut: {error}")
        peers.in_netns(channel, run)
    senders = [threading.Thread(target=send) for _ in range(20)]
    for thread in senders:
        thread.start()
    for thread in senders:
        thread.join(120)
    assert len(answered) == 20
    assert not any(" 200 " in a.split("\n")[0] for a in answered), answered
    grown = memory(agent.proc.pid, "VmHWM") - peak
    assert grown < 32 * MIB, f"the agent's peak memory grew by {grown >> 20} MiB"
    still_working()


def test_a_replayed_request_is_refused_before_its_body_while_jobs_still_run(agent, channel):
    head, body = peerwire.captured(AGENT_IP, AGENT_NETNS, channel, HA_KEY.encode(), "POST",
                                   "/v1/nothing", {"pad": "p" * 4096})
    head = peerwire.header(head, "Connection", "close")     # not signed
    with peerwire.connect(channel, AGENT_IP, peers.PEER_PORT) as sock:
        sock.sendall(head + body)          # the original: the agent answers (no such path)
        assert " 404 " in peerwire.final(peerwire.answer_of(sock, 10)).splitlines()[0]
    watch = Watch(agent.proc.pid)
    baseline = watch.sample()
    replies = []

    def replay():
        def run():
            for _ in range(50):
                try:
                    with socket.create_connection((AGENT_IP, peers.PEER_PORT),
                                                  timeout=5) as sock:
                        sock.sendall(head)        # the headers alone: the body never comes
                        replies.append(peerwire.answer_of(sock, 2))
                except (OSError, AssertionError) as error:
                    replies.append(f"failed: {error}")
        peers.in_netns(channel, run)
    replayers = [threading.Thread(target=replay) for _ in range(4)]
    for thread in replayers:
        thread.start()
    try:
        still_working()
    finally:
        for thread in replayers:
            thread.join(60)
        most = watch.stop()
    refused = [r for r in replies if "a request seen before" in r]
    assert len(refused) == len(replies) == 200, [r for r in replies if r not in refused][:3]
    assert most["threads"] <= baseline["threads"] + CAP + 10, (baseline, most)


def test_a_new_pair_key_goes_back_with_the_pair_and_stays_only_when_confirmed(
        agent, ha_peer, tmp_path):
    peer_netns = ha_peer.netns
    old, new, newer = HA_KEY, "a new pair key, never confirmed", "a key left to its deadline"
    apply(old, confirm=True)
    wait_until(lambda: answers(peer_netns, old), 30, "the channel on the first key")
    # a new key: in force while pending, gone with Roll back
    apply(new)
    wait_until(lambda: answers(peer_netns, new), 10, "the pending key in force")
    assert not answers(peer_netns, old)
    assert wait(queue.enqueue("ha.cancel"), 30).state == "succeeded"
    assert answers(peer_netns, old), "the confirmed key is back with the confirmed pair"
    with pytest.raises(peers.PeerError, match="pair keys differ"):
        ask(peer_netns, new)
    # confirmed: it stays
    apply(new, confirm=True)
    assert answers(peer_netns, new) and not answers(peer_netns, old)
    # left to the confirm deadline: the confirmed key comes back by itself
    apply(newer, timeout=10)
    assert answers(peer_netns, newer)
    wait_until(lambda: answers(peer_netns, new), 30, "the confirmed key back at the deadline")
    assert not answers(peer_netns, newer)
    # each key root's alone; none in a job's result or the agent's log
    ha_dir = tmp_path / "ha"
    for path in [ha_dir / "ha.key", *ha_dir.glob("revisions/*/ha.key")]:
        info = os.lstat(path)
        assert (info.st_uid, oct(info.st_mode & 0o777)) == (0, "0o600"), path
    assert (ha_dir / "ha.key").read_text().strip() == new
    results = json.dumps([job.result for job in Job.objects.all()])
    log = agent.log.read_text()
    for key in (old, new, newer):
        assert key not in results and key not in log
