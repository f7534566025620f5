from django import forms

from network import draft as network_drafts
from tusklib.checks import interface_problem

from . import document as backups
from .restore import CONFIRMED, DRAFT, backup_ports


class UploadForm(forms.Form):
    file = forms.FileField(label="Backup file", help_text=(
        f"A file the Download button made (JSON, at most {backups.MAX_BYTES // 2**20} MiB). "
        "Nothing changes until you have seen what it would change and confirmed."))

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > backups.MAX_BYTES:
            raise forms.ValidationError(
                f"{upload.size} bytes: a backup is at most {backups.MAX_BYTES // 2**20} MiB")
        return upload


PORT_FIELD = "port-"   # + the backup's port name: which port of this box takes it


class ConfirmForm(forms.Form):
    """The preview's confirmation. With a network section whose ports this box does not
    all have (box: this box's port names), one select per backup port: the port of this
    box that takes its configuration, each at most once."""

    token = forms.CharField(widget=forms.HiddenInput)
    source = forms.ChoiceField(label="The draft becomes", widget=forms.RadioSelect, choices=[
        (DRAFT, "the backup's draft"), (CONFIRMED, "the backup's confirmed revision")],
        initial=DRAFT)
    apply = forms.BooleanField(required=False, initial=True, label="Apply the policy now",
                               help_text="Queues the normal apply of the restored policy "
                                         "draft: confirm it on the Policy page, or it rolls "
                                         "back. The network is never applied here.")

    keep_network = forms.BooleanField(
        required=False, label="Leave this box's network as it is",
        help_text="Restore the rest: the backup's network is not restored and needs no "
                  "ports mapped; the policy is then checked against this box's network.")

    def __init__(self, *args, confirmed=None, network=None, box=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.network = network
        if not network:
            del self.fields["keep_network"]
        network_confirmed = network and network["confirmed"]
        if confirmed or network_confirmed:
            policy = (f"the policy of the backup's confirmed revision {confirmed['revision']}"
                      if confirmed else "the policy's draft (it has no confirmed revision)")
            net = ("" if not network else "; the network's confirmed configuration"
                   if network_confirmed else "; the network's draft (it has no confirmed one)")
            self.fields["source"].choices = [
                (DRAFT, "the backup's draft" + ("s of the policy and the network"
                                                if network else "")),
                (CONFIRMED, policy + net)]
            if network:
                self.fields["source"].label = "The drafts become"
        else:
            del self.fields["source"]
        ports = backup_ports(network) if network and box is not None else {}
        self.ports = {} if set(ports) <= set(box or ()) else ports
        for name, role in self.ports.items():
            self.fields[PORT_FIELD + name] = forms.ChoiceField(
                label=f"{name} ({role}) of the backup becomes", required=True,
                choices=[("", "choose a port of this box")] + [(p, p) for p in box],
                initial=name if name in box else "", error_messages={
                    "required": f"choose the port of this box that takes {name}'s "
                                "configuration",
                    "invalid_choice": f"%(value)s: this box has no such port (it has: "
                                      f"{', '.join(box)})"})

    def clean(self):
        data = super().clean()
        chosen = {}
        if data.get("keep_network"):   # nothing to map: the backup's network stays out
            for name in self.ports:
                self.errors.pop(PORT_FIELD + name, None)
            data["ports"] = {}
            return data
        for name in self.ports:
            port = data.get(PORT_FIELD + name)
            if not port:
                continue
            if port in chosen:
                self.add_error(PORT_FIELD + name, f"{port} is already chosen for "
                                                  f"{chosen[port]}: a port takes one")
                continue
            chosen[port] = name
            for document in self._documents():
                self._check_vlan_names(document, name, port)
        data["ports"] = {name: port for port, name in chosen.items()}
        return data

    def _documents(self):
        network = self.network
        return [network["draft"]] + ([network["confirmed"]["document"]]
                                     if network["confirmed"] else [])

    def _check_vlan_names(self, document, name, port):
        """A VLAN named after its port follows it: the new name must be one Linux takes."""
        for old, new in network_drafts.follow_ports(document, {name: port}).items():
            problem = old != name and interface_problem(new)
            if problem and PORT_FIELD + name not in self.errors:
                self.add_error(PORT_FIELD + name, f"the VLAN {old} would be renamed "
                                                  f"{new}: {problem}")


def confirm_form(document, data=None, token=None):
    """The preview's ConfirmForm for the backup document, against this box's ports."""
    box = network_drafts.present()
    return ConfirmForm(data, initial={"token": token}, confirmed=document["policy"]["confirmed"],
                       network=document.get("network"), box=box and sorted(box))
