"""What a box of an HA pair reports (docs/HA.md): its VRRP role, as keepalived's notify
(ha-notify) recorded it, and conntrackd's statistics (`conntrackd -s`), parsed into the
numbers the HA page and the metrics show. conntrackd prints no machine-readable form;
the parser reads the sections of conntrackd 1.4's report by their titles and fails
loudly (ValueError) on a report that has none of them."""
import os
import re

ROLES = ("MASTER", "BACKUP", "FAULT", "STOP")
_SECTION = re.compile(r"^(cache internal|cache external|external inject|traffic processed|"
                      r"UDP traffic|multicast traffic|message tracking)\b.*:\s*$", re.M)
_COUNT = re.compile(r"(\d+)\s+([A-Za-z][A-Za-z ]*?)(?=\s+\d|\s*$)", re.M)
_NAMED = re.compile(r"^\s*([a-z][a-z ]+):\s+(\d+)(?:\s+failed:\s+(\d+))?\s*$", re.M)


def role(state_dir):
    """MASTER, BACKUP, FAULT or STOP as ha-notify last recorded it, or None (keepalived
    has not reported yet, or the record is not one of those)."""
    try:
        with open(os.path.join(state_dir, "state"), encoding="ascii") as handle:
            text = handle.read(16).strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if text in ROLES else None


def _key(words):
    return re.sub(r"[^a-z]+", "_", words.strip().lower()).strip("_")


def conntrackd_stats(text):
    """conntrackd -s's report -> {section: {counter: number}}, e.g.
    {"cache_internal": {"current_active_connections": 1, "connections_created": 1,
    "connections_created_failed": 0, ...}, "udp_traffic": {"bytes_sent": 172, ...},
    "message_tracking": {"malformed_msgs": 0, "lost_msgs": 0}}."""
    titles = list(_SECTION.finditer(text))
    if not titles:
        raise ValueError("not a conntrackd statistics report: none of its sections")
    report = {}
    for number, title in enumerate(titles):
        end = titles[number + 1].start() if number + 1 < len(titles) else len(text)
        body = text[title.end():end]
        counters = {}
        for match in _NAMED.finditer(body):         # "connections created:   1  failed: 0"
            name = _key(match.group(1))
            counters[name] = int(match.group(2))
            if match.group(3) is not None:
                counters[f"{name}_failed"] = int(match.group(3))
        for line in body.splitlines():              # "   172 Bytes sent   184 Bytes recv"
            if ":" in line:
                continue
            for value, words in _COUNT.findall(line):
                counters[_key(words)] = int(value)
        report[_key(title.group(1))] = counters
    return report


def sync_health(report):
    """The few numbers an operator watches: entries this box holds in conntrackd's cache,
    what the peer's sync put into this kernel (and failed to), and messages lost."""
    cache = report.get("cache_internal", {})
    inject = report.get("external_inject", {})
    tracking = report.get("message_tracking", {})
    link = report.get("udp_traffic", {})
    return {"entries": cache.get("current_active_connections", 0),
            "injected": inject.get("connections_created", 0)
            + inject.get("connections_updated", 0),
            "inject_failures": sum(v for k, v in inject.items() if k.endswith("_failed")),
            "lost": tracking.get("lost_msgs", 0),
            "malformed": tracking.get("malformed_msgs", 0),
            "send_errors": link.get("error_send", 0), "recv_errors": link.get("error_recv", 0)}
