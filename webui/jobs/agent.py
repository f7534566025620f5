"""tusk-agent: the privileged half of Tusk. It alone runs nft, writes /sys and
starts captures; the web process only queues jobs for it in PostgreSQL.

Main loop: LISTEN for new jobs and hand each to a worker thread. The apps' periodic
work (the heartbeat, statistics, the policy store's state) runs beside it, each task on
a thread of its own (periodic.py); their start-up hooks run before the first job.
At start it settles what a previous agent left: jobs it was running are queued
again when their kind may run twice, failed with an explanation otherwise (and the
kind's `abandoned` hook settles the rest: a capture keeps what it wrote).
Long-running kinds (captures, analyses) have a pool of their own, so that they never
hold the workers that policy and tuning jobs need.
SIGTERM/SIGINT: stop claiming, let running jobs finish (up to STOP_GRACE seconds).
TUSK_AGENT_PLUGINS: modules to import besides the apps' agent_jobs, comma-separated -
the tests register failing and slow periodic tasks this way.
"""
import importlib
import logging
import os
import select
import signal
import socket
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import connection, connections
from django.utils import timezone

from . import periodic, queue, registry
from .models import AgentHeartbeat

log = logging.getLogger("tusk.agent")

WORKERS = 4
LONG_WORKERS = 4   # long-running jobs (captures) have their own threads: they never
                   # hold the workers that policy and tuning jobs need
STOP_GRACE = 30


class Run:
    """What a handler gets: its job's arguments, who asked, and a progress reporter."""

    def __init__(self, job, config, agent):
        self.job = job
        self.args = job.args
        self.user = job.created_by.get_username() if job.created_by_id else "agent"
        self.config = config
        self.agent = agent

    def progress(self, percent, message=""):
        queue.progress(self.job, percent, message)


class Agent:
    def __init__(self, config=None):
        self.config = config or settings.TUSK
        self.id = f"{socket.gethostname()}:{os.getpid()}:{int(time.time())}"
        self.stopping = threading.Event()
        self.pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="job")
        self.long_pool = ThreadPoolExecutor(max_workers=LONG_WORKERS, thread_name_prefix="long")
        self.running = {}  # job id -> (kind, future)
        self.lock = threading.Lock()
        self.listener = None
        # stop() writes here: a SIGTERM ends the wait for NOTIFY at once, not after its
        # second (the interrupted poll is retried once the handler has run, PEP 475, and
        # then finds this readable) - systemctl stop, and every test's agent, a second sooner
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)

    # -- set-up --------------------------------------------------------------------------

    def _listen(self):
        """A connection of its own for LISTEN (Django's may be closed and reopened)."""
        import psycopg2
        db = settings.DATABASES["default"]
        conn = psycopg2.connect(dbname=db["NAME"], user=db["USER"], password=db["PASSWORD"] or None,
                                host=db["HOST"] or None, port=db["PORT"] or None,
                                application_name="tusk-agent listen")
        conn.autocommit = True
        with conn.cursor() as cursor:
            cursor.execute(f"LISTEN {queue.CHANNEL_NEW}")
        return conn

    def start(self):
        for module in filter(None, os.environ.get("TUSK_AGENT_PLUGINS", "").split(",")):
            importlib.import_module(module.strip())
        periodic.run_start_hooks(self)
        now = timezone.now()
        AgentHeartbeat.objects.update_or_create(agent=self.id, defaults={"started_at": now,
                                                                         "seen_at": now})
        requeued, failed = queue.recover(self.id, registry.is_retry_safe, self._abandoned)
        if requeued or failed:
            log.warning("jobs left by a previous agent: queued again %s, failed %s",
                        requeued, failed)
        self.listener = self._listen()
        periodic.start(self)
        log.info("agent %s ready (target %s)", self.id, self.config.netns or "this system")

    def _abandoned(self, job):
        found = registry.get(job.kind)
        if found and found.abandoned:
            found.abandoned(job, self.config)

    # -- the loop ------------------------------------------------------------------------

    def serve(self):
        self.start()
        # poll, not select: select() cannot wait on a descriptor past 1023, and the unit
        # allows the agent more (LimitNOFILE)
        poller = select.poll()
        poller.register(self.listener, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        try:
            while not self.stopping.is_set():
                self._dispatch()
                # woken by NOTIFY; once a second anyway, for jobs that came while every
                # worker was busy
                ready = poller.poll(1000)
                if any(fd != self._wake_r for fd, _ in ready):
                    self.listener.poll()
                    self.listener.notifies.clear()
        finally:
            self.shutdown()

    def _dispatch(self):
        long_kinds = registry.long_running_kinds()
        while True:
            with self.lock:
                if self.stopping.is_set():
                    return
                busy_long = sum(1 for kind, _ in self.running.values() if kind in long_kinds)
                short_free = len(self.running) - busy_long < WORKERS
                long_free = busy_long < LONG_WORKERS
            if short_free and long_free:
                job = queue.claim(self.id)
            elif short_free:
                job = queue.claim(self.id, exclude=long_kinds)
            elif long_free:
                job = queue.claim(self.id, only=long_kinds)
            else:
                return
            if job is None:
                return
            pool = self.long_pool if job.kind in long_kinds else self.pool
            with self.lock:
                self.running[job.pk] = (job.kind, pool.submit(self._run, job))

    def _run(self, job):
        try:
            found = registry.get(job.kind)
            if found is None:
                queue.fail(job, f"this agent does not know job kind {job.kind!r}")
                return
            log.info("job %s %s started", job.pk, job.kind)
            try:
                result = found.function(Run(job, self.config, self))
            except registry.JobFailed as exc:
                queue.fail(job, str(exc), result=exc.result)
                log.info("job %s %s failed: %s", job.pk, job.kind, exc)
            except Exception as exc:
                log.exception("job %s %s crashed", job.pk, job.kind)
                queue.fail(job, f"internal error: {type(exc).__name__}: {exc}\n"
                                f"{traceback.format_exc(limit=3)}")
            else:
                queue.succeed(job, result)
                log.info("job %s %s succeeded", job.pk, job.kind)
        finally:
            with self.lock:
                self.running.pop(job.pk, None)
            connections.close_all()

    def stop(self, *_):
        self.stopping.set()
        try:
            os.write(self._wake_w, b"\0")
        except BlockingIOError:     # woken already
            pass

    def shutdown(self):
        self.pool.shutdown(wait=False)
        self.long_pool.shutdown(wait=False)
        deadline = time.monotonic() + STOP_GRACE
        while time.monotonic() < deadline:
            with self.lock:
                if not self.running:
                    break
            time.sleep(0.1)
        with self.lock:
            left = list(self.running)
        if left:
            log.warning("stopping with jobs still running: %s", left)
        if self.listener is not None:
            self.listener.close()
        connection.close()


def main():
    # The agent's threads keep their connections (a periodic task's runs every few
    # seconds; a job's thread closes its own at the end): the web process's CONN_MAX_AGE
    # made each of some twenty threads start a new server process a minute.
    settings.DATABASES["default"]["CONN_MAX_AGE"] = None
    agent = Agent()
    signal.signal(signal.SIGTERM, agent.stop)
    signal.signal(signal.SIGINT, agent.stop)
    agent.serve()
