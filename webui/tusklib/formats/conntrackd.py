"""conntrackd.conf, read by conntrackd's flex lexer (conntrack-tools 1.4,
src/read_config_lex.l): a value is one token, and which token a word becomes decides
whether the file parses at all. The lexer takes the longest match and, between rules of
the same length, the first listed; so an interface named "abc" or "beef" is an IPv6
address to it (the ip6 rule comes before string), one named "UDP", "Sync" or "no" is a
keyword, and one with "@" or "+" or starting with a digit is two tokens - each a syntax
error that leaves the state sync down. This module runs those rules on a value before it
is written, and refuses a value that would not be the one token its key expects.

A value is always the last word on its line here, so the newline after it ends it."""
import re

from . import FormatRefused, text_of

# The lexer's rules, in its order: (token, pattern). Keywords are literal strings; the
# character classes of its on/off/yes/no rules ([o|O][n|N]) also take "|", which no value
# here holds.
KEYWORDS = (
    "UNIX", "IPv4_address", "IPv6_address", "IPv4_Destination_Address",
    "IPv6_Destination_Address", "IPv4_interface", "IPv6_interface", "Interface", "Multicast",
    "UDP", "TCP", "HashSize", "RefreshTime", "CacheTimeout", "CommitTimeout", "HashLimit",
    "Path", "Backlog", "Group", "Port", "LogFile", "Syslog", "LockFile", "General", "Sync",
    "Stats", "SocketBufferSize", "SocketBufferSizeMaxGrown", "SocketBufferSizeMaxGrowth",
    "NetlinkBufferSize", "NetlinkBufferSizeMaxGrowth", "Mode", "ResendQueueSize", "Checksum",
    "ACKWindowSize", "for", "SYN_SENT", "SYN_RECV", "ESTABLISHED", "FIN_WAIT", "CLOSE_WAIT",
    "LAST_ACK", "TIME_WAIT", "CLOSE", "CLOSED", "LISTEN", "SndSocketBuffer",
    "RcvSocketBuffer", "Filter", "Protocol", "Address", "State", "Accept", "Ignore",
    "PurgeTimeout", "From", "Userspace", "Kernelspace", "EventIterationLimit", "Default",
    "PollSecs", "NetlinkOverrunResync", "Nice", "Scheduler", "Type", "Priority",
    "NetlinkEventsReliable", "DisableInternalCache", "DisableExternalCache", "Options",
    "TCPWindowTracking", "ExpectationSync", "ErrorQueueLength", "Helper", "QueueNum",
    "QueueLen", "Policy", "ExpectMax", "ExpectTimeout", "Systemd", "StartupResync")
_HEX = "[0-9a-fA-F]{1,4}"
_IP4_PART = "[0-2]*(?:[0-9]*[0-9]+)"
_IP6_CIDR = r"(?:/[0-1]*[0-9]*[0-9]+)"
_IP6_PART = f"(?:{_HEX}:?)"
RULES = [(f"keyword {word}", re.escape(word)) for word in KEYWORDS] + [
    ("on", "[o|O][n|N]|[y|Y][e|E][s|S]"),
    ("off", "[o|O][f|F][f|F]|[n|N][o|O]"),
    ("NUMBER", "[0-9]+"),
    ("SIGNED_NUMBER", r"[\-+][0-9]+"),
    ("IP", rf"{_IP4_PART}\.{_IP4_PART}\.{_IP4_PART}\.{_IP4_PART}(?:/[0-2]*[0-9]+)?"),
    ("IP", f"(?:{_IP6_PART}{{0,7}}::{_IP6_PART}{{0,7}}){_IP6_CIDR}?|"
           f"(?:(?:{_HEX}:){{0,7}}{_HEX}){_IP6_CIDR}?"),
    ("PATH", r'/[^"\n ]*'),
    ("alarm", "[A|a][L|l][A|a][R|r][M|m]"),
    ("alarm", "[P|p][E|e][R|r][S|s][I|i][S|s][T|t][E|e][N|n][T|T]"),
    ("ftfw", "[F|f][T|t][F|f][W|w]"),
    ("ftfw", "[N|n][A|a][C|c][K|k]"),
    ("notrack", "[N|n][O|o][T|t][R|r][A|a][C|c][K|k]"),
    ("STRING", r"[a-zA-Z][a-zA-Z0-9.\-_]*"),
]
_COMPILED = [(token, re.compile(pattern)) for token, pattern in RULES]
_PLAIN = re.compile(r"[A-Za-z0-9_.:/@+-]+")


def first_token(text):
    """(token, length) of the token the lexer makes at the start of text: the longest
    match of any rule, the first rule on a tie; (None, 0) when none matches."""
    best, length = None, 0
    for token, pattern in _COMPILED:
        for end in range(len(text), length, -1):
            if pattern.fullmatch(text, 0, end):
                best, length = token, end
                break
    return best, length


def token(value, expected, where):
    """The text of value if conntrackd reads it as exactly one `expected` token."""
    text = text_of(value, _PLAIN, where)
    found, length = first_token(text)
    if found != expected or length != len(text):
        kind = {"STRING": "a name", "IP": "an address", "PATH": "a path",
                "NUMBER": "a number"}[expected]
        if found is None or length != len(text):
            why = "more than one word to it"
        elif found.startswith("keyword"):
            why = f"its keyword {text}"
        elif found in ("on", "off"):
            why = f"its word for {found}"
        elif found in ("alarm", "ftfw", "notrack"):
            why = f"the name of its mode {found}"
        else:
            why = {"IP": "an address", "STRING": "a name", "PATH": "a path",
                   "NUMBER": "a number", "SIGNED_NUMBER": "a number"}[found]
        raise FormatRefused(f"{where}: conntrackd cannot read {text!r} as {kind}: it is "
                            f"{why} (its lexer's rules)")
    return text


def name(value, where="conntrackd.conf"):
    """An interface's name (Interface)."""
    return token(value, "STRING", where)


def address(value, where="conntrackd.conf"):
    return token(value, "IP", where)


def path(value, where="conntrackd.conf"):
    return token(value, "PATH", where)


def number(value, where="conntrackd.conf"):
    return token(value, "NUMBER", where)
