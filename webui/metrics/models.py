"""The metrics app keeps no rows of its own: a scrape token is an accounts.Token of scope
metrics (accounts/tokens.py), and the ruleset's counter reading is the policy's
(policy.models.CounterReading)."""
