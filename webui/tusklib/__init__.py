"""Plain-Python utilities that the cores (policy, tuning, diag, selftest, appliance), the
agent and the Django project share: the configuration file (config), atomic writes
(files), child processes (children) and the shape of bad input (problems). Nothing here
imports Django, so a core never imports the Django project's package (webui/tusk/) to
reach them."""
