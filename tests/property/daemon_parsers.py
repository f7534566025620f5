"""Readers of the daemons' file formats, written from each daemon's own rules and
independent of Tusk's renderers: the property tests render a file, read it back with
these and compare what the daemon would see with what was meant. They decode every
escape the daemon decodes, so a value that smuggled one in reads back as something else.

    rainerscript(text)  rsyslog.conf   -> [(object, {parameter: value}, [children])]
    systemd_ini(text)   systemd INI    -> [(section, key, value)]
    blocks(text)        keepalived.conf and conntrackd.conf -> [(words, [children] | None)]
    frr_commands(text)  frr.conf, and FRR's `show running-config` -> sorted [command path]
    snmpd_conf(text)    snmpd.conf     -> [(token, [words] or the rest of its line)]

Each raises Unreadable where the daemon would stop with a syntax error."""
import re


class Unreadable(ValueError):
    pass


# -- rsyslog's RainerScript (grammar/lexer.l, rainerscript.c's unescape) --------------------

_RS_TOKEN = re.compile(r"""
    (?P<space>[ \t\r\n]+) | (?P<comment>\#[^\n]*) |
    (?P<name>[A-Za-z_][A-Za-z0-9_.]*) | (?P<punct>[(){}=]) |
    (?P<string>"(?:[^"\\]|\\.)*"|'[^']*')
""", re.VERBOSE | re.DOTALL)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "'": "'"}


def _unescape(body):
    out, i = [], 0
    while i < len(body):
        char = body[i]
        if char == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if re.match(r"[0-7]{3}", body[i + 1:i + 4]):
                out.append(chr(int(body[i + 1:i + 4], 8)))
                i += 4
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(char)
        i += 1
    return "".join(out)


def _rs_tokens(text):
    position = 0
    while position < len(text):
        match = _RS_TOKEN.match(text, position)
        if not match:
            raise Unreadable(f"rsyslog: no token at {text[position:position + 20]!r}")
        position = match.end()
        kind = match.lastgroup
        if kind in ("space", "comment"):
            continue
        value = match.group()
        if kind == "string":
            value = _unescape(value[1:-1]) if value[0] == '"' else value[1:-1]
        yield kind, value


def rainerscript(text):
    tokens = list(_rs_tokens(text))
    position = 0

    def take(kind=None, value=None):
        nonlocal position
        if position >= len(tokens):
            raise Unreadable("rsyslog: the file ends inside an object")
        token = tokens[position]
        if (kind and token[0] != kind) or (value and token[1] != value):
            raise Unreadable(f"rsyslog: expected {value or kind}, got {token}")
        position += 1
        return token[1]

    def statements(until):
        found = []
        while position < len(tokens) and tokens[position] != ("punct", until):
            name = take("name")
            take("punct", "(")
            parameters = {}
            while tokens[position] != ("punct", ")"):
                key = take("name")
                take("punct", "=")
                if key in parameters:
                    raise Unreadable(f"rsyslog: {key} twice in {name}()")
                parameters[key] = take("string")
            take("punct", ")")
            children = None
            if position < len(tokens) and tokens[position] == ("punct", "{"):
                take("punct", "{")
                children = statements("}")
                take("punct", "}")
            found.append((name, parameters, children))
        return found

    result = statements(None)
    if position != len(tokens):
        raise Unreadable("rsyslog: tokens after the last object")
    return result


# -- systemd's INI files (src/shared/conf-parser.c) ------------------------------------------

def systemd_ini(text):
    entries, section, continued = [], None, ""
    for raw in text.split("\n"):
        line = continued + raw
        continued = ""
        if line.endswith("\\"):
            continued = line[:-1] + " "
            continue
        line = line.strip(" \t\r")
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            if not line.endswith("]") or len(line) < 3:
                raise Unreadable(f"systemd: bad section line {line!r}")
            section = line[1:-1]
            continue
        if "=" not in line:
            raise Unreadable(f"systemd: a line without '=': {line!r}")
        if section is None:
            raise Unreadable(f"systemd: a key before any section: {line!r}")
        key, _, value = line.partition("=")
        entries.append((section, key.strip(), value.strip()))
    if continued:
        raise Unreadable("systemd: the file ends in a continued line")
    return entries


# -- keepalived's and conntrackd's blocks (keepalived parser.c, conntrackd's lexer) ----------

def _words(line, comments):
    words, position = [], 0
    while position < len(line):
        char = line[position]
        if char in " \t\r":
            position += 1
        elif char in comments:
            break
        elif char in "{}":
            words.append(char)
            position += 1
        elif char == '"':
            end = line.find('"', position + 1)
            if end < 0:
                raise Unreadable(f"an unterminated quote in {line!r}")
            words.append(line[position:end + 1])
            position = end + 1
        else:
            match = re.compile(r"[^ \t\r{}\"]+").match(line, position)
            words.append(match.group())
            position = match.end()
    return words


def blocks(text, comments="#!"):
    """keepalived (comments "#!") or conntrackd (comments "#"): each statement is its
    words up to the line's end or a "{", a block holds its statements until "}"."""
    stack = [[]]
    for line in text.split("\n"):
        words = _words(line, comments)
        while words:
            if words[0] == "}":
                if len(stack) == 1:
                    raise Unreadable("a '}' closes nothing")
                stack.pop()
                words = words[1:]
                continue
            if "{" in words:
                head = words[:words.index("{")]
                block = []
                stack[-1].append((tuple(head), block))
                stack.append(block)
                words = words[words.index("{") + 1:]
                continue
            if "}" in words:
                stack[-1].append((tuple(words[:words.index("}")]), None))
                words = words[words.index("}"):]
                continue
            stack[-1].append((tuple(words), None))
            words = []
    if len(stack) != 1:
        raise Unreadable("a block is not closed")
    return stack[0]


# -- FRR's frr.conf (lib/command.c: whitespace-separated words, no quoting) ----------------

FRR_FRAME = {"exit", "exit-address-family", "end", "exit-vrf"}
FRR_BOILERPLATE = ("frr version", "frr defaults", "hostname", "service integrated-vtysh-config",
                   "Building configuration...", "Current configuration:")


def frr_commands(text):
    """Each command with the commands that opened its node, as word tuples:
    (("router", "bgp", "65001"), ("neighbor", "10.0.0.2", "remote-as", "65010")). vtysh
    splits on white space and has no quoting; a line starting with ! or # is a comment.
    A node is what a less indented line before it opened (FRR writes and prints its
    nodes indented); exit lines and the banner FRR prints are not commands. Sorted:
    the order FRR prints nodes in is its own."""
    found, stack = [], []
    for raw in text.split("\n"):
        stripped = raw.strip(" \t\r")
        if not stripped or stripped[0] in "!#" or stripped in FRR_FRAME or \
                stripped.startswith(FRR_BOILERPLATE):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        words = tuple(stripped.split())
        found.append(tuple(w for _, w in stack) + (words,))
        stack.append((indent, words))
    return sorted(found)


# -- net-snmp's snmpd.conf (snmplib/read_config.c: read_config, copy_nword_const) ----------

# the tokens whose handlers take the rest of the line as it stands (agent/mibgroup/mibII/
# system_mib.c: system_parse_config_string2 copies it, quotes and backslashes and all)
SNMPD_REST = ("sysLocation", "sysContact", "sysName", "sysDescr")


def copy_nword(text):
    """(the first word of text, the rest after its white space), as net-snmp reads it: a
    word starting with " or ' runs to the matching quote; a backslash takes the next
    character literally, inside quotes or not. An unterminated quote ends at the line's
    end (net-snmp only logs it): Unreadable here, since no renderer should write one."""
    word, index = [], 0
    if text[:1] in ("'", '"'):
        quote, index = text[0], 1
        while index < len(text) and text[index] != quote:
            if text[index] == "\\" and index + 1 < len(text):
                index += 1
            word.append(text[index])
            index += 1
        if index >= len(text):
            raise Unreadable(f"no end quote in {text!r:.60}")
        index += 1
    else:
        while index < len(text) and not text[index].isspace():
            if text[index] == "\\" and index + 1 < len(text):
                index += 1
            word.append(text[index])
            index += 1
    return "".join(word), text[index:].lstrip(" \t\r\n\f\v")


def snmpd_conf(text):
    """snmpd.conf -> [(token, [words]) or (token, rest)] in order: a line is a token and
    the rest, blank lines and those whose first non-blank character is # skipped; the
    rest-of-line tokens keep their text (SNMPD_REST), the others are split into words."""
    found = []
    for line in text.split("\n"):
        line = line.lstrip(" \t\r\f\v")
        if not line or line.startswith("#"):
            continue
        token, rest = copy_nword(line)
        if token in SNMPD_REST:
            found.append((token, rest))
            continue
        words = []
        while rest:
            word, rest = copy_nword(rest)
            words.append(word)
        found.append((token, words))
    return found
