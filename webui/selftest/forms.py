"""The self-test form: counts bounded by selftest.core.responder.LIMITS (the responder
checks the same bounds), and in hardware mode the two hosts and the port."""
import ipaddress
import re

from django import forms

from .core import responder

HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                      r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")


def _count(name, label, help_text=""):
    low, high, default = responder.LIMITS[name]
    kind = forms.FloatField if isinstance(default, float) else forms.IntegerField
    return kind(label=label, min_value=low, max_value=high, initial=default, help_text=help_text)


def _host(value):
    value = value.strip()
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        pass
    if not HOSTNAME.match(value) or value.replace(".", "").isdigit():
        raise forms.ValidationError(f"{value!r} is not an IP address or a host name")
    return value.lower()


class SelfTestForm(forms.Form):
    transactions = _count("transactions", "Transactions",
                          "Connect, a 32-byte request and answer, close (Allman's finger).")
    pings = _count("pings", "Feedback pings",
                   "16-byte messages echoed on an open connection; a failed one opens a new one.")
    bulk = _count("bulk", "Bulk transfers", "1 MiB each; the last 4 bytes come back.")
    timeout = _count("timeout", "Timeout (seconds)",
                     "For each connect and answer; a bulk transfer may take 10 times as long.")
    client_host = forms.CharField(label="Client host", max_length=253, required=False,
                                  help_text="Runs the responder with <code>--allow</code> "
                                            "this firewall's address; it measures.")
    server_host = forms.CharField(label="Server host", max_length=253, required=False,
                                  help_text="Runs the responder; reached through the firewall.")
    direct_address = forms.CharField(label="Server's direct address (optional)",
                                     max_length=253, required=False,
                                     help_text="The server on a path that does not cross the "
                                               "firewall: the baseline. Empty: no baseline.")
    port = forms.IntegerField(label="Responder port", min_value=1, max_value=65535,
                              initial=responder.DEFAULT_PORT)

    def __init__(self, *args, lab=False, **kwargs):
        super().__init__(*args, **kwargs)
        self.lab = lab
        if lab:   # the lab's namespaces, addresses and port come from the configuration
            for name in ("client_host", "server_host", "direct_address", "port"):
                del self.fields[name]
        else:
            self.fields["client_host"].required = True
            self.fields["server_host"].required = True

    def clean_client_host(self):
        return _host(self.cleaned_data["client_host"])

    def clean_server_host(self):
        return _host(self.cleaned_data["server_host"])

    def clean_direct_address(self):
        value = self.cleaned_data["direct_address"].strip()
        return _host(value) if value else ""

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        try:
            data["params"] = responder.check_params(
                {name: data[name] for name in ("transactions", "pings", "bulk", "timeout")})
        except responder.ParamError as exc:
            for name, message in exc.errors:
                self.add_error(name if name in self.fields else None, message)
        if not self.lab and data.get("direct_address") \
                and data["direct_address"] == data.get("server_host"):
            self.add_error("direct_address", "the same as the server host: a baseline must "
                                             "take a path that does not cross the firewall")
        return data
