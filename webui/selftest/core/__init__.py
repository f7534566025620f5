"""The self-test's measurement (Allman, IMC 2003), plain Python without Django:
responder.py (the far end, and the measuring client; one stdlib file that runs on any
host), stats.py (samples -> medians and percentiles), table.py (the plain-text table)."""
