"""Plain-Python utilities that the cores (policy, tuning, diag, selftest, appliance), the
agent and the Django project share: the configuration file (config), atomic writes
(files), child processes (children), the shape of bad input (problems) and the
commit-confirm of the policy and the network (commit). Nothing here
imports Django, so a core never imports the Django project's package (webui/tusk/) to
reach them."""
