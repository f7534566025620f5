"""The self-test form: counts bounded by selftest.core.responder.LIMITS (the responder
checks the same bounds), and in hardware mode the two hosts and the port."""
import ipaddress
import re
from enum import IntEnum

from django import forms

from tusklib.problems import Problem, ProblemsFormMixin

from .core import responder

PARAMS = ("transactions", "pings", "bulk", "timeout")   # the LIMITS this form asks for
HOSTNAME = re.compile(rf"^(?=.{{1,{responder.HOST_MAX}}}\Z)"    # \Z: "$" takes "name\n"
                      r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                      r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\Z")


class Code(IntEnum):
    PARAM = 2   # python -m selftest.core's exit status for bad parameters


def _problems(error):
    """A responder.ParamError as problems. responder.py stays one standard-library file
    (the hosts of a hardware self-test download it and run it as it is), so its error
    cannot be tusklib's; its (field, message) pairs become Problems here."""
    return [Problem(Code.PARAM, field, message) for field, message in error.errors]


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


class SelfTestForm(ProblemsFormMixin, forms.Form):
    transactions = _count("transactions", "Transactions",
                          "Connect, a 32-byte request and answer, close (Allman's finger).")
    pings = _count("pings", "Feedback pings",
                   "16-byte messages echoed on an open connection; a failed one opens a new one.")
    bulk = _count("bulk", "Bulk transfers", "1 MiB each; the last 4 bytes come back.")
    timeout = _count("timeout", "Timeout (seconds)",
                     "For each connect and answer; a bulk transfer may take 10 times as long.")
    client_host = forms.CharField(label="Client host", max_length=responder.HOST_MAX,
                                  required=False,
                                  help_text="Runs the responder with <code>--allow</code> "
                                            "this firewall's address; it measures.")
    server_host = forms.CharField(label="Server host", max_length=responder.HOST_MAX,
                                  required=False,
                                  help_text="Runs the responder; reached through the firewall.")
    direct_address = forms.CharField(label="Server's direct address (optional)",
                                     max_length=responder.HOST_MAX, required=False,
                                     help_text="The server on a path that does not cross the "
                                               "firewall: the baseline. Empty: no baseline.")
    port = forms.IntegerField(label="Responder port", min_value=1, max_value=65535,
                              initial=responder.DEFAULT_PORT)
    problem_fields = {name: name for name in PARAMS}

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
                {name: data[name] for name in PARAMS})
        except responder.ParamError as error:
            self.add_problems(_problems(error))
        if not self.lab and data.get("direct_address") \
                and data["direct_address"] == data.get("server_host"):
            self.add_error("direct_address", "the same as the server host: a baseline must "
                                             "take a path that does not cross the firewall")
        return data


def run_fields(config, lab, data):
    """What a run measures: in lab mode the lab's namespaces, addresses and port from the
    configuration, in hardware mode the hosts and port of the checked form data. The web
    process stores these in the SelfTest row; the agent derives them again, the same way."""
    if lab:
        return {"mode": "lab", "client_host": config.selftest_client_netns,
                "server_host": config.selftest_server_address,
                "direct_address": config.selftest_direct_address, "port": config.selftest_port}
    return {"mode": "hardware", "client_host": data["client_host"],
            "server_host": data["server_host"], "direct_address": data["direct_address"],
            "port": data["port"]}


def checked_run(test, config):
    """The agent's check of a SelfTest row, which the web user could have written: the
    same form, fed the row, and the run's fields derived as the web process derives
    them. Raises ValueError naming each bad field."""
    lab = bool(config.selftest_client_netns)
    expected = "lab" if lab else "hardware"
    if test.mode != expected:
        raise ValueError(f"mode: {test.mode!r:.40}, but this firewall runs self-tests in "
                         f"{expected} mode")
    params = test.params if isinstance(test.params, dict) else {}
    data = {name: params.get(name) for name in PARAMS}
    if not lab:
        data.update(client_host=test.client_host, server_host=test.server_host,
                    direct_address=test.direct_address, port=test.port)
    form = SelfTestForm({k: "" if v is None else v for k, v in data.items()}, lab=lab)
    if not form.is_valid():
        raise ValueError("; ".join(f"{field}: {' '.join(messages)}"
                                   for field, messages in form.errors.items()))
    fields = run_fields(config, lab, form.cleaned_data)
    if lab and (test.server_host, test.direct_address, test.port) != (
            fields["server_host"], fields["direct_address"], fields["port"]):
        raise ValueError("server_host: the row does not hold the lab's addresses and port "
                         "from the configuration")
    return fields, form.cleaned_data["params"]

