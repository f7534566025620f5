"""The web edge as the image runs it: the image's nginx.conf (rendered by tests/webedge.py,
as tools/tusk-lab renders it) in front of gunicorn and Django on the web tier's PostgreSQL,
met the way a client on the management network meets it - from distinct loopback source
addresses, with raw sockets where a client would misbehave."""
import os
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse
from http.client import HTTPConnection, HTTPSConnection
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.hashers import make_password
from kit import wait_until
from tuskweb import database_toml, make_user, web_files

from accounts.models import AuditEntry, LoginFailure
from diag.models import Capture
from lab.edge import NGINX_USER, render_nginx_conf, self_signed_certificate, web_socket
from lab.paths import ROOT

PASSWORD = "correct horse battery"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Edge:
    """nginx (the image's configuration) and gunicorn behind it, in a directory of their own."""

    def __init__(self, django_settings):
        self.dir = Path(tempfile.mkdtemp(prefix="tusk-edge-", dir="/var/tmp"))
        os.chmod(self.dir, 0o755)   # nginx's workers (tusk-nginx) reach their temp files
        self.http, self.https, self.redirect = free_port(), free_port(), free_port()
        self.procs = []
        self.secret, _ = web_files(self.dir, "secret_key")
        self.config = self.dir / "tusk.toml"
        self.config.write_text(f"""[web]
secret_key_file = "{self.secret}"
allowed_hosts = ["127.0.0.1"]
tls = true
{database_toml(django_settings.DATABASES["default"])}[agent]
netns = ""
state_dir = "{self.dir / 'policy'}"
tuning_state_dir = "{self.dir / 'tuning'}"
capture_dir = "{self.dir / 'captures'}"
""")

    def start(self):
        crt, key = self_signed_certificate(self.dir)
        listener = web_socket(self.dir / "web.sock")
        self.access_log = self.dir / "gunicorn-access.log"
        env = dict(os.environ, TUSK_CONFIG=str(self.config),
                   DJANGO_SETTINGS_MODULE="tusk.settings")
        self.spawn("gunicorn", [sys.executable, "-m", "gunicorn", "--workers", "2", "--bind",
                                f"fd://{listener.fileno()}", "--access-logfile",
                                str(self.access_log), "tusk.wsgi:application"],
                   cwd=ROOT / "webui", env=env, pass_fds=(listener.fileno(),))
        listener.close()
        conf = self.dir / "nginx.conf"
        conf.write_text(render_nginx_conf(
            self.dir, self.dir / "web.sock", ROOT / "webui" / "build" / "static",
            {"80": self.redirect, "443": self.https, "127.0.0.1:8080": self.http}, crt, key))
        self.nginx = self.spawn("nginx", ["nginx", "-c", str(conf), "-p", str(self.dir),
                                          "-g", "daemon off;"])
        wait_until(self.answers, 30,
                   lambda: f"the edge answering: {self.log('nginx')}{self.log('gunicorn')}")
        return self

    def answers(self):
        for name, proc in self.procs:
            assert proc.poll() is None, f"{name} exited: {self.log(name)}"
        try:
            return Client(self, "127.0.0.1", tls=False).get("/healthz/")[0] == 200
        except OSError:
            return False

    def spawn(self, name, argv, **kwargs):
        proc = subprocess.Popen(argv, stdout=open(self.dir / f"{name}.log", "ab"),
                                stderr=subprocess.STDOUT, start_new_session=True, **kwargs)
        self.procs.append((name, proc))
        return proc

    def log(self, name):
        return (self.dir / f"{name}.log").read_text(errors="replace")

    def spooled(self):
        """Files nginx holds request bodies in right now."""
        return [Path(top, f) for top, _, files in os.walk(self.dir / "nginx-body") for f in files]

    def stop(self):
        for _, proc in reversed(self.procs):
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(20)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def edge(django_db_setup, system_users):
    if shutil.which("nginx") is None:
        pytest.fail("missing: nginx (Debian package nginx) - run `make test`, which installs it")
    edge = Edge(settings).start()
    yield edge
    edge.stop()


class Client:
    """One client of the edge at a loopback source address (nginx's TCP peer), keeping
    its cookies; HTTPS to the 443 listener, or plain HTTP to the loopback one (where
    Django answers /healthz/ only and redirects the rest to HTTPS)."""

    def __init__(self, edge, source, tls=True):
        self.edge, self.source, self.tls = edge, source, tls
        self.cookies = {}

    def request(self, method, path, body=None, headers=None):
        if self.tls:
            context = ssl.create_default_context(cafile=str(self.edge.dir / "tusk.crt"))
            conn = HTTPSConnection("127.0.0.1", self.edge.https, context=context, timeout=30,
                                   source_address=(self.source, 0))
        else:
            conn = HTTPConnection("127.0.0.1", self.edge.http, timeout=30,
                                  source_address=(self.source, 0))
        headers = dict(headers or {})
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            content = response.read()
        finally:
            conn.close()
        for cookie in response.headers.get_all("Set-Cookie") or []:
            name, _, rest = cookie.partition("=")
            self.cookies[name] = rest.split(";", 1)[0]
        return response.status, response.headers, content

    def get(self, path):
        return self.request("GET", path)

    def post(self, path, fields, headers=None, content_type="application/x-www-form-urlencoded"):
        if "csrftoken" not in self.cookies:
            self.get("/accounts/login/")
        body = fields if isinstance(fields, bytes) else urllib.parse.urlencode(
            dict(fields, csrfmiddlewaretoken=self.cookies["csrftoken"])).encode()
        # over HTTPS Django checks the Referer
        return self.request("POST", path, body, dict(
            {"Content-Type": content_type,
             "Referer": f"https://127.0.0.1:{self.edge.https}{path}",
             "X-CSRFToken": self.cookies["csrftoken"]}, **(headers or {})))

    def login(self, username, password, headers=None):
        return self.post("/accounts/login/", {"username": username, "password": password},
                         headers)[0]


def user_with_real_hash(username, role, must_change=False):
    """A user gunicorn can check: it runs the real settings' hasher, not the tests' MD5."""
    user = make_user(username, role, must_change=must_change)
    user.password = make_password(PASSWORD, hasher="pbkdf2_sha256")
    user.save()
    return user


# -- the client's address: login throttling and the audit log ----------------------------

@pytest.mark.django_db(transaction=True)
def test_a_flood_against_admin_from_one_address_does_not_lock_admin_out_elsewhere(edge):
    user_with_real_hash("admin", "admin")
    attacker = Client(edge, "127.0.0.2")
    for _ in range(settings.LOGIN_FAILURES_ALLOWED):
        assert attacker.login("admin", "wrong guess") == 200
    assert Client(edge, "127.0.0.3").login("admin", PASSWORD) == 302, \
        "five wrong passwords from another address locked the admin out"
    login = AuditEntry.objects.get(action="login")
    assert (login.username, login.address) == ("admin", "127.0.0.3")
    # the guesser's own (user, address) limit has fired: even the right password is refused
    assert attacker.login("admin", PASSWORD) == 429
    assert set(LoginFailure.objects.values_list("address", flat=True)) == {"127.0.0.2"}


@pytest.mark.django_db(transaction=True)
def test_address_headers_a_client_sends_are_not_believed(edge):
    user_with_real_hash("admin", "admin")
    forger = Client(edge, "127.0.0.4")
    forged = {"X-Real-IP": "203.0.113.9", "X-Forwarded-For": "203.0.113.9"}
    assert forger.login("admin", "wrong guess", forged) == 200
    assert LoginFailure.objects.get().address == "127.0.0.4"
    assert forger.login("admin", PASSWORD, forged) == 302
    assert AuditEntry.objects.get(action="login").address == "127.0.0.4"


# -- request bodies: only an admin may send a large one ---------------------------------

def send_large_body(edge, source, cookies=None, declared=500_000_000, sent=4_000_000):
    """POSTs to /diag/upload/ over HTTPS declaring a 500 MB body and sending 4 MB of it.
    Returns the files nginx was spooling the body into while it was being sent, and the
    response's status line (None: no answer, nginx still waiting for the rest)."""
    raw = socket.create_connection(("127.0.0.1", edge.https), timeout=10,
                                   source_address=(source, 0))
    conn = ssl.create_default_context(cafile=str(edge.dir / "tusk.crt")).wrap_socket(
        raw, server_hostname="localhost")
    head = (f"POST /diag/upload/ HTTP/1.1\r\nHost: 127.0.0.1:{edge.https}\r\n"
            "Content-Type: multipart/form-data; boundary=tusk\r\n"
            f"Content-Length: {declared}\r\n")
    if cookies:
        head += "Cookie: " + "; ".join(f"{k}={v}" for k, v in cookies.items()) + "\r\n"
    try:
        conn.sendall(head.encode() + b"\r\n")
        try:
            conn.sendall(b"--tusk\r\n" + b"x" * sent)
        except OSError:
            pass   # nginx refused and closed before the body: what is wanted
        time.sleep(1)
        spooled = edge.spooled()
        conn.settimeout(5)
        try:
            status = conn.recv(4096).split(b"\r\n", 1)[0].decode() or None
        except OSError:   # a timeout: nginx still waits for the body
            status = None
    finally:
        conn.close()
    return spooled, status


def gunicorn_saw_an_upload(edge):
    return "/diag/upload/" in edge.access_log.read_text()


@pytest.mark.django_db(transaction=True)
def test_an_anonymous_large_upload_is_refused_before_its_body(edge):
    spooled, status = send_large_body(edge, "127.0.0.5")
    assert spooled == [], "nginx spooled an anonymous request body"
    assert status == "HTTP/1.1 401 Unauthorized", edge.log("nginx")
    assert not gunicorn_saw_an_upload(edge)


@pytest.mark.django_db(transaction=True)
def test_a_viewer_or_an_admin_who_must_change_the_password_cannot_send_a_large_body(edge):
    for name, role, must_change in (("victor", "viewer", False), ("adam", "admin", True)):
        user_with_real_hash(name, role, must_change)
        client = Client(edge, "127.0.0.6")
        assert client.login(name, PASSWORD) == 302
        spooled, status = send_large_body(edge, "127.0.0.6", client.cookies)
        assert spooled == [], f"nginx spooled the body of {name} ({role})"
        assert status == "HTTP/1.1 403 Forbidden", name
    assert not gunicorn_saw_an_upload(edge)


def tiny_pcap():
    """A pcap file header (microsecond, Ethernet) and one 60-byte frame."""
    header = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    return header + struct.pack("<IIII", 1, 0, 60, 60) + bytes(60)


@pytest.mark.django_db(transaction=True)
def test_an_admin_still_uploads_a_pcap_through_nginx(edge):
    user_with_real_hash("alice", "admin")
    client = Client(edge, "127.0.0.7")
    assert client.login("alice", PASSWORD) == 302
    token = client.cookies["csrftoken"]
    body = (f"--tusk\r\nContent-Disposition: form-data; name=\"csrfmiddlewaretoken\"\r\n\r\n"
            f"{token}\r\n--tusk\r\nContent-Disposition: form-data; name=\"file\"; "
            "filename=\"edge.pcap\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            ).encode() + tiny_pcap() + b"\r\n--tusk--\r\n"
    status, headers, _ = client.post("/diag/upload/", body,
                                     content_type="multipart/form-data; boundary=tusk")
    assert (status, headers["Location"]) == (302, "/diag/"), edge.log("gunicorn")[-3000:]
    upload = Capture.objects.get(source=Capture.Source.UPLOAD)
    assert (upload.name, upload.bytes) == ("edge.pcap", len(tiny_pcap()))
    assert AuditEntry.objects.get(action="capture upload").address == "127.0.0.7"


@pytest.mark.django_db(transaction=True)
def test_requests_in_progress_per_address_are_limited(edge):
    """Connections that sent a request head and hold back the body: the 17th from one
    address is refused at once; another address is still served."""
    held = []
    try:
        for _ in range(20):
            conn = socket.create_connection(("127.0.0.1", edge.http), timeout=5,
                                            source_address=("127.0.0.8", 0))
            conn.sendall(f"POST / HTTP/1.1\r\nHost: 127.0.0.1:{edge.http}\r\n"
                         "Content-Length: 100\r\n\r\n".encode())
            held.append(conn)
        time.sleep(1)
        answers = []
        for conn in held:
            conn.settimeout(0.2)
            try:
                answers.append(conn.recv(4096).split(b"\r\n", 1)[0].decode())
            except TimeoutError:
                answers.append(None)
        assert answers.count(None) == 16
        assert answers[16:] == ["HTTP/1.1 429 Too Many Requests"] * 4
        assert Client(edge, "127.0.0.9", tls=False).get("/healthz/")[0] == 200
    finally:
        for conn in held:
            conn.close()


# -- nginx's own user -------------------------------------------------------------------

def test_nginx_workers_run_as_their_own_user_without_database_or_secret_key(edge):
    workers = subprocess.run(["ps", "-o", "user=", "--ppid", str(edge.nginx.pid)],
                             capture_output=True, text=True).stdout.split()
    assert workers and set(workers) == {NGINX_USER}
    assert "tusk" not in subprocess.run(["id", "-nG", NGINX_USER], capture_output=True,
                                        text=True, check=True).stdout.split()
    db = settings.DATABASES["default"]
    psql = subprocess.run(["runuser", "-u", NGINX_USER, "--", "psql", "-h", db["HOST"], "-p",
                           str(db["PORT"]), "-U", db["USER"], "-d", db["NAME"], "-c",
                           "select 1"], capture_output=True, text=True, cwd="/")
    assert psql.returncode != 0 and "authentication failed" in psql.stderr, psql.stderr
    read = subprocess.run(["runuser", "-u", NGINX_USER, "--", "cat", str(edge.secret)],
                          capture_output=True, text=True)
    assert read.returncode != 0 and "Permission denied" in read.stderr


# -- headers and TLS --------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_pages_carry_the_security_headers(edge):
    user_with_real_hash("alice", "admin")
    client = Client(edge, "127.0.0.10")
    login_page = client.get("/accounts/login/")
    assert client.login("alice", PASSWORD) == 302
    for status, headers, _ in (login_page, client.get("/"), client.get("/policy/")):
        assert status == 200
        policy = dict(d.strip().split(" ", 1) for d in headers["Content-Security-Policy"]
                      .split(";"))
        assert policy["script-src"] == "'self'" and policy["style-src"] == "'self'"
        assert policy["default-src"] == "'self'" and policy["object-src"] == "'none'"
        assert policy["frame-ancestors"] == "'none'"
        assert "unsafe" not in headers["Content-Security-Policy"]
        assert headers["X-Frame-Options"] == "DENY"
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Referrer-Policy"] == "same-origin"
        assert headers["Strict-Transport-Security"] == "max-age=31536000"
        assert "Server: nginx/" not in str(headers)


def tls_handshake(edge, version, ciphers=None):
    """(protocol, cipher) of a handshake with the 443 listener, or the SSLError."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(edge.dir / "tusk.crt")
    context.minimum_version = context.maximum_version = version
    if ciphers:
        context.set_ciphers(ciphers + ":@SECLEVEL=0")
    with socket.create_connection(("127.0.0.1", edge.https), timeout=10) as raw:
        try:
            with context.wrap_socket(raw, server_hostname="localhost") as tls:
                return tls.version(), tls.cipher()[0]
        except ssl.SSLError as error:
            return error


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion:DeprecationWarning")
def test_tls_is_mozillas_intermediate_configuration(edge):
    assert tls_handshake(edge, ssl.TLSVersion.TLSv1_3)[0] == "TLSv1.3"
    for cipher in ("ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
                   "ECDHE-ECDSA-CHACHA20-POLY1305"):
        assert tls_handshake(edge, ssl.TLSVersion.TLSv1_2, cipher) == ("TLSv1.2", cipher)
    for cipher in ("ECDHE-ECDSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA384",
                   "ECDHE-ECDSA-AES128-SHA256"):
        refused = tls_handshake(edge, ssl.TLSVersion.TLSv1_2, cipher)
        assert isinstance(refused, ssl.SSLError), f"TLS 1.2 with {cipher} accepted"
    for old in (ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1):
        refused = tls_handshake(edge, old, "DEFAULT")
        assert isinstance(refused, ssl.SSLError), f"{old.name} accepted"
        assert "unsupported protocol" in str(refused) or "version" in str(refused), refused
