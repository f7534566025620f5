"""The browser tier's lab seen from outside the browser: fw's management port
(lab/namespaces.py: mgmt, its peer in this namespace, on the lab's own subnet chosen by
its HTTP port), the addresses it has now, the confirmed network.toml tools/tusk-lab keeps
for it, and whether the dashboard answers at an address."""
import json
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from tuskweb import BROWSER_LAB

from lab.namespaces import MANAGEMENT_PORT, Lab, management_subnet
from lab.ports import running_labs

NETWORK_TOML = Path("/var/tmp/tusk-lab") / BROWSER_LAB / "network" / "network.toml"


def lab():
    """The running browser lab's Lab, with its management subnet."""
    return Lab(BROWSER_LAB, management=management_subnet(running_labs()[BROWSER_LAB]["http"]))


def addresses(namespace=None):
    """The IPv4 addresses (address/length) of fw's management port now, or of this
    namespace's peer of it (namespace "")."""
    where = lab()
    inside = [] if namespace == "" else ["ip", "netns", "exec", namespace or where.fw]
    device = where.management_peer if namespace == "" else MANAGEMENT_PORT
    shown = subprocess.run([*inside, "ip", "-j", "-4", "addr", "show", "dev", device],
                           capture_output=True, text=True, check=True).stdout
    return sorted(f"{a['local']}/{a['prefixlen']}" for link in json.loads(shown)
                  for a in link["addr_info"])


def answers(address, scheme="https"):
    """The status of GET <scheme>://address/healthz/ (redirects not followed), or None
    when nothing answers there. The lab's certificate is self-signed."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE

    class Stay(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args):
            return None
    opener = urllib.request.build_opener(Stay, urllib.request.HTTPSHandler(context=context))
    try:
        with opener.open(f"{scheme}://{address}/healthz/", timeout=3) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None
