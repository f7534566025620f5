"""Uploads an update bundle through the appliance's own dashboard from inside the box,
as an admin's browser does: log in, the System page's form, its multipart post streamed
from the file - HTTPS to nginx on 127.0.0.1, the upload gate, gunicorn, the agent job.
test_appliance.py runs it in the guest (copied onto the operator's stick, the 9p share)
because QEMU's user networking under TCG carries a few hundred MB too slowly; the host
then follows the job page and presses the buttons.

    python3 upload_bundle.py BUNDLE USER PASSWORD   -> prints "JOB /jobs/<id>/"

Standard library only: the appliance's Python has no requests.
"""
import http.client
import os
import re
import secrets
import ssl
import sys
import urllib.parse

HOST = "127.0.0.1"
CONTEXT = ssl._create_unverified_context()     # the box's own self-signed certificate
cookies = {}


def request(method, path, body=None, headers=None):
    connection = http.client.HTTPSConnection(HOST, 443, context=CONTEXT, timeout=1800)
    sent = {"Host": HOST, "Referer": f"https://{HOST}{path}",
            "Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items()), **(headers or {})}
    connection.request(method, path, body=body, headers=sent)
    response = connection.getresponse()
    for name, value in response.getheaders():
        if name.lower() == "set-cookie":
            key, _, rest = value.partition("=")
            cookies[key] = rest.split(";")[0]
    text = response.read().decode("utf-8", "replace")
    connection.close()
    return response.status, response.getheader("Location"), text


def form_post(path, fields):
    fields = {"csrfmiddlewaretoken": cookies.get("csrftoken", ""), **fields}
    return request("POST", path, urllib.parse.urlencode(fields).encode(),
                   {"Content-Type": "application/x-www-form-urlencoded"})


def main(bundle, user, password):
    request("GET", "/accounts/login/")
    status, location, _ = form_post("/accounts/login/", {"username": user,
                                                         "password": password})
    if status != 302:
        sys.exit(f"login failed: HTTP {status}")
    request("GET", "/system/")
    boundary = secrets.token_hex(16)
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"csrfmiddlewaretoken\""
            f"\r\n\r\n{cookies['csrftoken']}\r\n--{boundary}\r\nContent-Disposition: "
            f"form-data; name=\"bundle\"; filename=\"{os.path.basename(bundle)}\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()

    def body():
        yield head
        with open(bundle, "rb") as handle:
            while chunk := handle.read(1 << 20):
                yield chunk
        yield tail

    length = len(head) + os.path.getsize(bundle) + len(tail)
    status, location, text = request("POST", "/system/upgrade/", body(), {
        "Content-Type": f"multipart/form-data; boundary={boundary}",
        "Content-Length": str(length)})
    job = re.fullmatch(r"(?:https?://[^/]+)?(/jobs/\d+/)\?next=system", location or "")
    if status != 302 or not job:
        sys.exit(f"the upload was refused: HTTP {status} {location}\n{text[-2000:]}")
    print(f"JOB {job.group(1)}")


if __name__ == "__main__":
    main(*sys.argv[1:])
