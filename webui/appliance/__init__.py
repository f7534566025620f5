"""The appliance: what runs on the box around the web UI (boot, network, console, installer)."""
