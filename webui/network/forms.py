"""Forms for one item of the network draft. Each turns its fields into the item's plain
structure (to_item: network.toml's keys) and back (initial_from), and maps a problem
path inside the item to its field (problem_fields). The network core stays the one
place that validates: forms only split what a text box holds."""
import re

from django import forms

from tusklib.names import VLAN_ID_MAX, VLAN_ID_MIN
from tusklib.problems import ProblemsFormMixin

from .core import model
from .core.applier import CONFIRM_TIMEOUT_DEFAULT, CONFIRM_TIMEOUT_MAX, CONFIRM_TIMEOUT_MIN
from .core.routing import HIDDEN


def _split(text):
    return [part for part in re.split(r"[\s,]+", text or "") if part]


def _addresses():
    return forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                           help_text="IPv4 and IPv6 addresses with their prefix "
                                     "(192.0.2.1/24, 2001:db8::1/64), one per line or "
                                     "separated by spaces.")


def _mtu():
    return forms.IntegerField(initial=0, label="MTU", help_text="0: as the driver sets it.")


def _description():
    return forms.CharField(required=False, max_length=model.DESCRIPTION_MAX)


class ItemForm(ProblemsFormMixin, forms.Form):
    version = forms.IntegerField(widget=forms.HiddenInput)
    keys = ()           # the item's keys this form edits, in the document's order
    lists = ()          # of those, the ones a text box holds as a list

    def to_item(self):
        return {key: _split(self.cleaned_data[key]) if key in self.lists
                else self.cleaned_data[key] for key in self.keys}

    @classmethod
    def initial_from(cls, item):
        return {key: "\n".join(item.get(key) or []) if key in cls.lists else item.get(key)
                for key in cls.keys if key in item}


class PortForm(ItemForm):
    """One Ethernet port; its name comes from the page (the machine's port)."""

    role = forms.ChoiceField(choices=[(r, r) for r in model.ROLES], help_text=(
        "management: where the dashboard answers (one port); traffic: forwarded traffic, "
        "the policy's zones; unused: the link stays down."))
    description = _description()
    addresses = _addresses()
    dhcp = forms.BooleanField(required=False, label="DHCPv4",
                              help_text="The management port only.")
    autoconf = forms.BooleanField(required=False, label="IPv6 autoconfiguration",
                                  help_text="Router advertisements (SLAAC); the management "
                                            "port only.")
    mtu = _mtu()
    keys = ("role", "description", "addresses", "dhcp", "autoconf", "mtu")
    lists = ("addresses",)
    problem_fields = {key: key for key in keys}


class VlanForm(ItemForm):
    name = forms.CharField(max_length=15, help_text="The interface's name, e.g. eth1.100.")
    parent = forms.ChoiceField(help_text="A traffic port or a bond. Not the management "
                                         "port: tagged networks on its wire would be one "
                                         "switch mistake away from the dashboard.")
    id = forms.IntegerField(label="VLAN id", help_text=f"{VLAN_ID_MIN}-"
                                                       f"{VLAN_ID_MAX}")
    description = _description()
    addresses = _addresses()
    mtu = _mtu()
    keys = ("name", "parent", "id", "description", "addresses", "mtu")
    lists = ("addresses",)
    problem_fields = {key: key for key in keys}

    def __init__(self, *args, parents=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["parent"].choices = [(p, p) for p in parents]


class BondForm(ItemForm):
    name = forms.CharField(max_length=15, help_text="e.g. bond0.")
    mode = forms.ChoiceField(choices=[(m, m) for m in model.BOND_MODES], help_text=(
        "802.3ad: LACP with the switch, every member carries traffic; active-backup: one "
        "member at a time, no switch configuration."))
    hash_policy = forms.ChoiceField(
        choices=[(h, h) for h in model.HASH_POLICIES], label="Hash policy (802.3ad)",
        help_text="What picks a flow's member link: layer3+4 hashes addresses and ports. "
                  "Every packet of one flow takes the same member, so one TCP flow never "
                  "goes faster than one member link.")
    members = forms.MultipleChoiceField(help_text="Traffic ports without addresses or VLANs "
                                                  "of their own.")
    description = _description()
    addresses = _addresses()
    mtu = _mtu()
    keys = ("name", "mode", "hash_policy", "members", "description", "addresses", "mtu")
    lists = ("addresses",)
    problem_fields = {key: key for key in keys}

    def __init__(self, *args, ports=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["members"].choices = [(p, p) for p in ports]

    def to_item(self):
        item = super().to_item()
        item["members"] = list(item["members"])
        return item


class BridgeForm(ItemForm):
    name = forms.CharField(max_length=15, help_text="e.g. br0.")
    members = forms.MultipleChoiceField(help_text=(
        "Two or more traffic ports, bonds or VLANs without addresses: the sides the "
        "policy filters between (a zone names them)."))
    stp = forms.BooleanField(required=False, label="Spanning tree (STP)", help_text=(
        "Off: the bridge is a wire to spanning tree and forwards at once. On: it takes "
        "part, and holds a new port for 30 s while it listens and learns."))
    bpdu = forms.ChoiceField(choices=[(c, c) for c in model.BPDU_CHOICES], label="BPDUs",
                             help_text=(
        "Without STP: forward lets the switches on both sides see each other's BPDUs, so "
        "they block a loop made through the box; drop keeps each side's spanning tree "
        "apart."))
    vlans = forms.CharField(required=False, label="VLANs", help_text=(
        "VLAN ids the bridge carries tagged on every member, separated by spaces; empty: "
        "every frame crosses as it came, tagged or not."))
    description = _description()
    mtu = _mtu()
    keys = ("name", "members", "stp", "bpdu", "vlans", "description", "mtu")
    problem_fields = {key: key for key in keys}

    def __init__(self, *args, links=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["members"].choices = [(p, p) for p in links]

    def clean_vlans(self):
        ids = []
        for part in _split(self.cleaned_data["vlans"]):
            if not part.isdigit():
                raise forms.ValidationError(f"{part!r} is not a VLAN id (a number "
                                            f"{VLAN_ID_MIN}-{VLAN_ID_MAX})")
            ids.append(int(part))
        return ids

    def to_item(self):
        item = super().to_item()
        item["members"] = list(item["members"])
        return item

    @classmethod
    def initial_from(cls, item):
        initial = super().initial_from(item)
        initial["vlans"] = " ".join(str(v) for v in item.get("vlans") or [])
        return initial


class RouteForm(ItemForm):
    destination = forms.CharField(max_length=64, help_text='A prefix (10.20.0.0/16, '
                                  '2001:db8:20::/48) or "default".')
    gateway = forms.CharField(required=False, max_length=64, help_text=(
        "The next router, on a directly connected network. Empty: the destination is "
        "on the interface's own link."))
    metric = forms.IntegerField(initial=0, min_value=0, help_text="Lower wins.")
    interface = forms.ChoiceField(required=False, help_text="Empty: the interface whose "
                                                            "subnet holds the gateway.")
    keys = ("destination", "gateway", "metric", "interface")
    problem_fields = {key: key for key in keys}

    def __init__(self, *args, links=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["interface"].choices = [("", "(by the gateway)")] + \
            [(name, name) for name in links]


class SystemForm(ItemForm):
    hostname = forms.CharField(max_length=253, label="Host name")
    dns = forms.CharField(required=False, label="DNS resolvers", help_text=(
        f"IP addresses, at most {model.SERVERS_MAX}, separated by spaces."))
    ntp = forms.CharField(required=False, label="NTP servers", help_text=(
        f"Host names or IP addresses, at most {model.SERVERS_MAX}; systemd-timesyncd "
        "keeps the clock."))
    timezone = forms.CharField(max_length=64, label="Time zone",
                               help_text="An IANA name: UTC, Europe/Zurich, ...")
    keys = ("hostname", "dns", "ntp", "timezone")
    lists = ("dns", "ntp")
    problem_fields = {key: key for key in keys}

    @classmethod
    def initial_from(cls, item):
        initial = super().initial_from(item)
        for key in cls.lists:
            initial[key] = " ".join(item.get(key) or [])
        return initial


class RoutingForm(ItemForm):
    """[routing]'s own keys and [routing.bgp]'s; the neighbours and OSPF links are items."""
    router_id = forms.CharField(required=False, max_length=64, label="Router id",
                                help_text="An IPv4 address naming this box to its peers. "
                                          "Empty: FRR takes the highest IPv4 address.")
    asn = forms.IntegerField(initial=0, min_value=0, label="BGP AS number", help_text=(
        f"This box's autonomous system, {model.ASN_MIN}-{model.ASN_MAX}. 0: no BGP."))
    prefixes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                               label="Prefixes announced", help_text=(
        "Announced to every neighbour of their family while this box has a route to "
        "them, one per line (198.51.100.0/24)."))
    communities = forms.CharField(required=False, label="Communities", help_text=(
        "Set on every announcement: ASN:value (65001:100) or no-export, no-advertise, "
        "separated by spaces."))
    bfd_interval = forms.IntegerField(initial=model.BFD_INTERVAL_DEFAULT,
                                      label="BFD interval (ms)", help_text=(
        f"{model.BFD_INTERVAL_MIN}-{model.BFD_INTERVAL_MAX}: how often BFD packets go "
        "each way."))
    bfd_multiplier = forms.IntegerField(initial=model.BFD_MULTIPLIER_DEFAULT,
                                        label="BFD multiplier", help_text=(
        "Missed packets before a peer is down: with 300 ms and 3, a silent peer is down "
        "in 900 ms and its routes go."))
    blackholes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}),
                                 label="Black-holes", help_text=(
        "Hosts (/32, /128) always announced as black-hole routes (RFC 7999) to the "
        "neighbours that take them, one per line; the IDS hook's blocks add more for their "
        "time."))
    standby = forms.BooleanField(required=False, label="Standby (the HA pair's secondary)",
                                 help_text=(
        "Announce with a longer AS path and OSPF cost 65535, so that neighbours send "
        "traffic to the primary while both run. Required on the secondary, refused on the "
        "primary."))
    keys = ("router_id", "asn", "prefixes", "communities", "blackholes", "bfd_interval",
            "bfd_multiplier", "standby")
    lists = ("prefixes", "communities", "blackholes")
    problem_fields = {"router_id": "router_id", "bfd_interval": "bfd_interval",
                      "standby": "standby",
                      "bfd_multiplier": "bfd_multiplier", "bgp.asn": "asn",
                      "bgp.prefixes": "prefixes", "bgp.communities": "communities",
                      "bgp.blackholes": "blackholes"}

    @classmethod
    def initial_from(cls, routing):
        bgp = routing.get("bgp") or {}
        return super().initial_from({**{k: routing.get(k) for k in
                                        ("router_id", "bfd_interval", "bfd_multiplier",
                                         "standby") if k in routing},
                                     **{k: bgp.get(k) for k in ("asn", "prefixes",
                                                                "communities", "blackholes")
                                        if k in bgp}})


class NeighbourForm(ItemForm):
    address = forms.CharField(max_length=64, help_text=(
        "The peer's address, on the subnet of one of this box's routed links."))
    remote_as = forms.IntegerField(min_value=0, label="Its AS number")
    description = _description()
    password = forms.CharField(required=False, max_length=200, label="TCP MD5 password",
                               widget=forms.PasswordInput(render_value=False), help_text=(
        "RFC 2385; the peer needs the same. Never shown again. Empty when editing: the "
        "password stays as it is."))
    no_password = forms.BooleanField(required=False, label="Remove the password")
    bfd = forms.BooleanField(required=False, initial=True, label="BFD", help_text=(
        "Sub-second detection of a peer that went silent."))
    accept = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                             label="Prefixes accepted", help_text=(
        "Taken from this peer with every more specific prefix, one per line (0.0.0.0/0: "
        "everything). Empty: nothing is taken."))
    blackhole = forms.BooleanField(required=False, label="Takes black-hole routes",
                                   help_text=(
        "Sent the hosts this box blocks and announces (RFC 7999's BLACKHOLE community, with "
        "NO_EXPORT), so that the upstream drops their traffic before it gets here."))
    keys = ("address", "remote_as", "description", "password", "bfd", "accept", "blackhole")
    lists = ("accept",)
    problem_fields = {key: key for key in keys}

    def __init__(self, *args, had_password=False, **kwargs):
        super().__init__(*args, **kwargs)
        self.had_password = had_password
        if had_password:
            self.fields["password"].help_text = "A password is set. " + \
                self.fields["password"].help_text

    def to_item(self):
        item = super().to_item()
        del item["password"]
        password = self.cleaned_data["password"]
        if self.cleaned_data["no_password"]:
            password = ""
        elif not password and self.had_password:
            password = HIDDEN           # the draft's password for this address, kept
        return {**item, "password": password}

    def audited(self):
        """to_item() as the audit log keeps it: whether a password is set, never which."""
        item = self.to_item()
        return {**item, "password": "(set)" if item["password"] else ""}

    @classmethod
    def initial_from(cls, item):
        initial = super().initial_from(item)
        initial.pop("password", None)
        return initial


class OspfForm(ItemForm):
    interface = forms.ChoiceField(help_text="A routed traffic link with addresses: OSPFv2 "
                                            "over its IPv4, OSPFv3 over its IPv6.")
    area = forms.CharField(max_length=15, initial=model.OSPF_AREA_DEFAULT,
                           help_text="0.0.0.0 (the backbone) or a number.")
    cost = forms.IntegerField(initial=0, min_value=0, help_text="0: FRR's, from the link's "
                                                                "speed.")
    passive = forms.BooleanField(required=False, help_text=(
        "Announce the link's subnets, form no adjacency on it."))
    point_to_point = forms.BooleanField(required=False, label="Point-to-point", help_text=(
        "Only two routers on the link: adjacent at once, no designated router election "
        "(which waits 40 s)."))
    bfd = forms.BooleanField(required=False, initial=True, label="BFD")
    keys = ("interface", "area", "cost", "passive", "point_to_point", "bfd")
    problem_fields = {key: key for key in keys}

    def __init__(self, *args, links=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["interface"].choices = [(name, name) for name in links]


FORMS_BY_SECTION = {"vlans": VlanForm, "bonds": BondForm, "bridges": BridgeForm,
                    "routes": RouteForm, "neighbours": NeighbourForm, "ospf": OspfForm}


class DiscardForm(forms.Form):
    version = forms.IntegerField(widget=forms.HiddenInput)


class ApplyForm(forms.Form):
    version = forms.IntegerField(widget=forms.HiddenInput)
    timeout = forms.IntegerField(min_value=CONFIRM_TIMEOUT_MIN, max_value=CONFIRM_TIMEOUT_MAX,
                                 initial=CONFIRM_TIMEOUT_DEFAULT,
                                 label="Confirm within (seconds)",
                                 help_text="Unconfirmed, the previous configuration comes back "
                                           "by itself.")
