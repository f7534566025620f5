"""The box's network as plain Python (no Django, no database): the model, its one
validator, the renderings for systemd-networkd and iproute2, and the applier. Used by
tusk-net, the console menu, tusk-boot, the agent and the web pages (network/)."""
