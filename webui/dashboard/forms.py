from django import forms

from .calculators import LANES, PCIE


class WindowForm(forms.Form):
    bandwidth = forms.FloatField(min_value=0.001, max_value=10_000_000,
                                 label="Path bandwidth (Mbit/s)")
    rtt = forms.FloatField(min_value=0.001, max_value=100_000, label="Round-trip time (ms)")
    window = forms.IntegerField(required=False, min_value=1, max_value=2**31,
                                label="A window to check (bytes)",
                                help_text="Optional: what this window caps one flow at.")


class PcieForm(forms.Form):
    generation = forms.TypedChoiceField(coerce=int, choices=[(g, f"PCIe {g}.0") for g in PCIE])
    lanes = forms.TypedChoiceField(coerce=int, choices=[(n, f"x{n}") for n in LANES])
    ports = forms.IntegerField(min_value=1, max_value=64, label="NIC ports")
    port_gbps = forms.FloatField(min_value=0.01, max_value=1600,
                                 label="Line rate per port (Gbit/s)")
