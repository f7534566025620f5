"""The image's web edge off the image: its nginx.conf (rootfs-overlay/usr/lib/tusk/nginx.conf)
rendered for another directory and ports of its own, and gunicorn's socket made the way
tusk-web.socket makes it. tools/tusk-lab and the web tier's edge tests (tests/web/
test_edge.py) both start nginx from this rendering, so what they exercise is the image's
configuration: its users, limits, auth_request, headers and TLS settings."""
import grp
import os
import pwd
import re
import socket
import subprocess
from pathlib import Path

from lab.paths import IMAGE_NGINX_CONF
from lab.users import NGINX_USER, WEB_USER

IMAGE_SOCKET = "/run/tusk/web.sock"
IMAGE_STATIC = "/usr/lib/tusk/webui/build/static/"


def render_nginx_conf(directory, socket_path, static, ports, certificate, key,
                      address="127.0.0.1"):
    """The image's nginx.conf with its paths moved into directory (pid, temporary files),
    gunicorn's socket and the static files at the given paths, and its listeners on
    address: ports maps the image's "80", "443" and "127.0.0.1:8080" to port numbers; a
    listener it leaves out is left out, and so are the IPv6 ones. address None: every
    IPv4 address, as on the image (the lab's second nginx, inside fw's namespace, where
    the management address may change under it). The master runs as root, so directory
    must be root's."""
    lines = []
    for line in IMAGE_NGINX_CONF.read_text().splitlines():
        words = line.split()
        directive = words[0] if words else ""
        if directive == "listen":
            image = words[1].rstrip(";")
            if image.startswith("[") or image not in ports:
                continue
            here = f"{address}:{ports[image]}" if address else f"{ports[image]}"
            line = line.replace(f" {image}", f" {here}", 1)
        elif directive == "pid" or directive.endswith("_temp_path"):
            line = re.sub(r"/\S*/([^/;\s]+);", lambda m: f"{directory}/{m.group(1)};", line)
        elif directive == "ssl_certificate":
            line = re.sub(r"/\S+;", f"{certificate};", line)
        elif directive == "ssl_certificate_key":
            line = re.sub(r"/\S+;", f"{key};", line)
        lines.append(line)
    text = "\n".join(lines) + "\n"
    for image, here in ((IMAGE_SOCKET, str(socket_path)), (IMAGE_STATIC, f"{static}/")):
        assert image in text, f"{IMAGE_NGINX_CONF} no longer names {image}: update {__file__}"
        text = text.replace(image, here)
    return text


def web_socket(path):
    """gunicorn's listening socket as tusk-web.socket makes it on the image: owner tusk,
    group tusk-nginx, mode 0660, so that nginx's workers (tusk-nginx, not in group tusk)
    can connect and no one else can. Pass it to gunicorn as --bind fd://N."""
    path = Path(path)
    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    os.chown(path, pwd.getpwnam(WEB_USER).pw_uid, grp.getgrnam(NGINX_USER).gr_gid)
    os.chmod(path, 0o660)
    listener.listen(128)
    listener.set_inheritable(True)
    return listener


def self_signed_certificate(directory):
    """A certificate of the kind first boot makes (appliance/boot.py: P-256, self-signed)."""
    crt, key = Path(directory) / "tusk.crt", Path(directory) / "tusk.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "30", "-subj",
                    "/CN=localhost/O=Tusk test", "-addext",
                    "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", key, "-out", crt],
                   check=True, capture_output=True)
    os.chmod(key, 0o600)
    return crt, key
