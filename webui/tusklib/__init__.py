"""Plain-Python utilities that the cores (policy, tuning, diag, selftest, appliance), the
agent and the Django project share: the configuration file (config), atomic writes
(files) and child processes (children). Nothing here imports Django, so a core never
imports the Django project's package (webui/tusk/) to reach them."""
