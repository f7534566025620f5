"""What a person can type into a policy file, a TOML configuration or a backup never
ends in a traceback: the policy's loader returns a model or raises PolicyError, each
TOML reader (network.toml, ha.toml, tusk.toml) its model or its own error, the JSON
reader of a backup a document or JsonError - for any text built from scalars of every
YAML, TOML or JSON type (dates real and impossible, numbers of any length and base,
floats, NaN, base64, merge keys, tags of every kind, nested flow collections, keys
twice, escapes of half a surrogate pair, stray control characters, bytes that are not
UTF-8). Each reader turns every parser and conversion error into a problem with its
place; these tests look for the one it misses. Plain Python, no kernel."""
import os
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ha.core.config import HaError
from ha.core.config import parse as parse_ha
from network.core.errors import NetworkError
from network.core.normalise import parse as parse_network
from policy.core.errors import PolicyError
from policy.core.model import Policy
from policy.core.normalise import load_policy_text
from tusklib import jsonread
from tusklib.config import ConfigError
from tusklib.config import load as load_tusk_toml

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
TOML_SETTINGS = settings(SETTINGS, max_examples=80)

DIGITS = st.text("0123456789_", min_size=1, max_size=60)
LONG_DIGITS = st.one_of(st.sampled_from([1000, 1001, 4300, 4301, 6000]),
                        st.integers(1, 6000)).map(lambda n: "9" * n)
DATE = st.from_regex(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}"
                     r"([Tt ][0-9]{1,2}:[0-9]{2}:[0-9]{2}(\.[0-9]{0,9})?"
                     r"( ?(Z|[-+][0-9]{1,2}(:[0-9]{2})?))?)?", fullmatch=True)
ESCAPES = st.sampled_from(["\\ud800", "\\udfff", "\\x00", "\\0", "\\U0010ffff", "\\U00110000",
                           "\\e", "\\N", "\\_", "\\L", "\\P", "\\t", "\\\\", "\\\""])
ODD = st.sampled_from(["\x00", "\x07", "\x1b", "\x7f", "\x85", "\u2028", "\ufeff", "\ufffe",
                       "²", "٣", "\t", "\r", "é", "\U0001f600"])


def yaml_scalars():
    number = st.one_of(
        DIGITS, LONG_DIGITS,
        st.tuples(st.sampled_from(["", "-", "+"]), st.sampled_from(["0x", "0b", "0o", "0", ""]),
                  DIGITS).map("".join),
        st.lists(st.integers(0, 99).map(str), min_size=2, max_size=400).map(":".join),
        st.from_regex(r"[-+]?([0-9_]*\.[0-9_]*([eE][-+]?[0-9]+)?|\.(inf|nan|Inf|NAN))",
                      fullmatch=True))
    words = st.sampled_from(["yes", "No", "on", "OFF", "~", "null", "true", "=", "<<", "", "-",
                             "?", "|", ">", "@x", "%x", "`x"])
    base64 = st.from_regex(r"[A-Za-z0-9+/=@ ]{0,24}", fullmatch=True)
    quoted = st.lists(st.one_of(ESCAPES, st.text(min_size=0, max_size=4)), max_size=5).map(
        lambda parts: '"' + "".join(p.replace('"', "") for p in parts) + '"')
    return st.one_of(number, DATE, words, base64, quoted, st.text(max_size=12),
                     st.lists(ODD, min_size=1, max_size=3).map("".join))


TAGS = st.sampled_from([
    "", "", "", "!!str ", "!!int ", "!!float ", "!!bool ", "!!null ", "!!timestamp ",
    "!!binary ", "!!set ", "!!omap ", "!!pairs ", "!!map ", "!!seq ", "!!merge ", "!!value ",
    "!!python/object:os.system ", "!!python/name:os.system ", "!!python/tuple ", "!mine ",
    "!<tag:yaml.org,2002:int> ", "!<tag:yaml.org,2002:timestamp> ", "&a ", "*a "])


def yaml_nodes():
    leaf = st.tuples(TAGS, yaml_scalars()).map("".join)
    return st.recursive(leaf, lambda inner: st.one_of(
        st.tuples(TAGS, st.lists(inner, max_size=4)).map(
            lambda t: f"{t[0]}[{', '.join(t[1])}]"),
        st.tuples(TAGS, st.lists(st.tuples(inner, inner), max_size=4)).map(
            lambda t: t[0] + "{" + ", ".join(f"{k}: {v}" for k, v in t[1]) + "}")),
        max_leaves=12)


@st.composite
def policy_texts(draw):
    """A policy's shape with any node in its places, or lines of any key and node."""
    node = yaml_nodes()
    if draw(st.booleans()):
        n = [draw(node) for _ in range(9)]
        return (f"version: {n[0]}\nsettings: {{confirm_timeout: {n[1]}, log_rate: {n[2]}}}\n"
                f"zones: [{{name: {n[3]}, interfaces: [{n[4]}], comment: {n[5]}}}]\n"
                f"classes:\n  - {{name: c, action: accept, mss: {{mode: fixed, value: {n[6]}}},"
                f" services: [{n[7]}]}}\nservices: [{{name: s, protocol: tcp, ports: [{n[8]}]}}]"
                "\n")
    lines = draw(st.lists(st.tuples(st.one_of(st.sampled_from(
        ["version", "zones", "settings", "classes", "<<", "? [a]", "- x"]), yaml_scalars()),
        node), min_size=1, max_size=6))
    return "".join(f"{key}: {value}\n" for key, value in lines)


@SETTINGS
@given(policy_texts())
def test_any_typed_policy_is_a_model_or_a_policy_error(text):
    try:
        assert isinstance(load_policy_text(text), Policy)
    except PolicyError as error:
        assert all(str(problem) for problem in error.problems)


# -- TOML ----------------------------------------------------------------------------------

def toml_scalars():
    return st.one_of(
        DIGITS, LONG_DIGITS,
        st.tuples(st.sampled_from(["", "-", "+"]), st.sampled_from(["0x", "0b", "0o", ""]),
                  DIGITS).map("".join),
        DATE, st.from_regex(r"[0-9]{1,2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{0,9})?)?", fullmatch=True),
        st.from_regex(r"[-+]?([0-9_]+(\.[0-9_]*)?([eE][-+]?[0-9]+)?|inf|nan)", fullmatch=True),
        st.sampled_from(["true", "false", "True", "''", '""', "'''x'''", '"""x"""']),
        st.lists(st.one_of(ESCAPES, st.text(max_size=4)), max_size=4).map(
            lambda parts: '"' + "".join(p.replace('"', "") for p in parts) + '"'),
        st.text(max_size=8), st.lists(ODD, min_size=1, max_size=3).map("".join))


def toml_values():
    return st.recursive(toml_scalars(), lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda items: f"[{', '.join(items)}]"),
        st.lists(st.tuples(st.from_regex(r"[a-z]{1,3}(\.[a-z]{1,3}){0,2}", fullmatch=True),
                           inner), max_size=3).map(
            lambda pairs: "{" + ", ".join(f"{k} = {v}" for k, v in pairs) + "}")),
        max_leaves=10)


@st.composite
def toml_texts(draw, tables, keys):
    """Tables and keys of the reader's own file, and others, each with any value."""
    lines = []
    for _ in range(draw(st.integers(1, 6))):
        table = draw(st.sampled_from(tables))
        if table:
            lines.append(table)
        for _ in range(draw(st.integers(0, 4))):
            key = draw(st.one_of(st.sampled_from(keys), st.from_regex(
                r"[a-z\"'.]{1,6}", fullmatch=True)))
            lines.append(f"{key} = {draw(toml_values())}")
    return "\n".join(lines) + "\n"


NETWORK_TABLES = ["", "[system]", "[[interfaces]]", "[[bonds]]", "[[vlans]]", "[[routes]]",
                  "[management]", "[[traffic]]", "[x.y]"]
NETWORK_KEYS = ["version", "hostname", "dns", "ntp", "timezone", "name", "role", "dhcp",
                "autoconf", "addresses", "mtu", "description", "members", "mode", "parent",
                "id", "destination", "gateway", "metric", "interface", "address"]


@TOML_SETTINGS
@given(toml_texts(NETWORK_TABLES, NETWORK_KEYS))
def test_any_typed_network_toml_is_a_model_or_a_network_error(text):
    try:
        parse_network(text)
    except NetworkError as error:
        assert all(str(problem) for problem in error.problems)


HA_TABLES = ["", "[ha]", "[[virtual]]", "[x]"]
HA_KEYS = ["version", "enabled", "role", "vrid", "advert_ms", "preempt", "sync_interface",
           "sync_address", "peer_address", "interface", "addresses"]


@TOML_SETTINGS
@given(toml_texts(HA_TABLES, HA_KEYS))
def test_any_typed_ha_toml_is_a_model_or_an_ha_error(text):
    try:
        parse_ha(text)
    except HaError as error:
        assert all(str(problem) for problem in error.problems)


TUSK_TABLES = ["", "[web]", "[database]", "[agent]", "[selftest]", "[x]"]
TUSK_KEYS = ["secret_key_file", "allowed_hosts", "tls", "debug", "upload_max_mb", "port",
             "bundle_max_mb", "name", "user", "host", "password_file", "netns",
             "sample_interval", "capture_quota_mb", "server_address", "client_netns"]


@TOML_SETTINGS
@given(toml_texts(TUSK_TABLES, TUSK_KEYS), st.binary(max_size=4))
def test_any_typed_tusk_toml_is_a_config_or_a_config_error(text, junk):
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "tusk.toml")
        with open(path, "wb") as handle:
            handle.write(text.encode("utf-8", "surrogatepass") + junk)
        try:
            load_tusk_toml(path)
        except ConfigError as error:
            assert str(error)


# -- JSON (a backup file) --------------------------------------------------------------------

def json_values():
    scalar = st.one_of(
        DIGITS.map(lambda d: d.replace("_", "") or "0"), LONG_DIGITS,
        st.from_regex(r"-?[0-9]{1,4}(\.[0-9]{0,4})?([eE][-+]?[0-9]{1,7})?", fullmatch=True),
        st.sampled_from(["NaN", "Infinity", "-Infinity", "true", "null", "nul", '""', "{", "]"]),
        st.lists(st.one_of(ESCAPES, st.sampled_from(["\\u0000", "\\ud800\\udc00", "\\uZZZZ"]),
                           st.text(max_size=4)), max_size=4).map(
            lambda parts: '"' + "".join(p.replace('"', "") for p in parts) + '"'),
        st.lists(ODD, min_size=1, max_size=2).map("".join))
    keys = st.sampled_from(['"a"', '"b"', '"format"', '"\\u0061"', "a", '""'])
    return st.recursive(scalar, lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda items: f"[{', '.join(items)}]"),
        st.lists(st.tuples(keys, inner), max_size=4).map(
            lambda pairs: "{" + ",\n ".join(f"{k}: {v}" for k, v in pairs) + "}")),
        max_leaves=12)


@TOML_SETTINGS
@given(json_values(), st.binary(max_size=3))
def test_any_typed_json_is_a_document_or_a_json_error(text, junk):
    for attempt in (lambda: jsonread.loads(text),
                    lambda: jsonread.load_bytes(text.encode("utf-8", "surrogatepass") + junk)):
        try:
            attempt()
        except jsonread.JsonError as error:
            assert error.described()
