"""Every limit of the Logs page, its storage and the remote syslog, shared by the core
checks, the forms and the agent."""

# The firewall's log: ulogd (rootfs-overlay/usr/lib/tusk/ulogd.conf) reads the policy's
# NFLOG group and appends one JSON object a line to CURRENT in the log directory; the
# agent renames it to CURRENT.1, CURRENT.2 ... (the oldest has the highest number).
CURRENT = "firewall.json"

# Storage: at most FILES files of FILE_MB MB each (the current one included), so the
# log never holds more than FILES x FILE_MB MB. The defaults keep 100 MB - a few hundred
# thousand records - on a data partition that also holds captures (2 GB by default).
FILES_DEFAULT, FILES_MIN, FILES_MAX = 10, 2, 100
FILE_MB_DEFAULT, FILE_MB_MIN, FILE_MB_MAX = 10, 1, 1000
MB = 1_000_000

# The Logs page: the newest TAIL_MAX records that match, found among at most SCAN_BYTES
# of the newest records (about 25 000 of them), so that one page view costs a bounded
# amount of reading whatever the filter; a narrower time range reaches further back.
TAIL_DEFAULT, TAIL_MAX = 100, 500
SCAN_BYTES = 16 * MB
LIVE_POLL_SECONDS = 2

# Remote syslog (RFC 5424): up to SYSLOG_TARGETS_MAX receivers. A host is an IP address
# or a DNS name (RFC 1123: labels of letters, digits and hyphens).
SYSLOG_TARGETS_MAX = 4
SYSLOG_PORT_DEFAULT = 514
PORT_MIN, PORT_MAX = 1, 65535
HOST_MAX = 253
# RFC 5424's APP-NAME and MSGID of every message; facility local0, severity notice
SYSLOG_APP_NAME = "tusk"
SYSLOG_MSGID = "firewall"
SYSLOG_FACILITY = "local0"
SYSLOG_SEVERITY = "notice"
# messages a receiver that is away may owe before the oldest are dropped (per receiver)
SYSLOG_QUEUE_MESSAGES = 10000
# the largest message forwarded (a ulogd record is about 700 bytes)
SYSLOG_MESSAGE_MAX = "8k"

# The agent's work (agent_jobs.py), by the names the pages read its results under
APPLY_JOB = "logs.apply"
KEEP_TASK = "logs.keep"
FORWARDER_TASK = "logs.forwarder"
START_TASK = "logs.start"
FORWARDER_CHECK_SECONDS = 5
