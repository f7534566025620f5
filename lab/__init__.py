"""Tusk on a development machine, what `make run` (tools/tusk-lab) is made of and what the
tests reuse: the namespace lab standing in for the networks (namespaces), the image's
users on this machine (users), the image's nginx.conf rendered for the lab's paths and
ports (edge), and where things are in the repository (paths)."""
