"""TOML a person typed (issue 34): network.toml, ha.toml and tusk.toml each turn every
way tomllib can fail into their own problem, with the line and column where they are
known - malformed TOML (tomllib's TOMLDecodeError, its place in the message before
Python 3.14 and in attributes from then on), a number longer than Python converts (a
plain ValueError from int()), arrays nested too deeply (RecursionError) and, for a file,
bytes that are not UTF-8. Plain Python."""
import tomllib

import pytest

from ha.core import config as ha_config
from ha.core.config import HaError
from network.core.errors import Code as NetworkCode
from network.core.errors import NetworkError
from network.core.normalise import parse as parse_network
from tusklib import config as tusk_config
from tusklib import tomlread

LONG = "9" * 5000
HEX = "0x" + "f" * 4000
DEEP = "[" * 5000 + "]" * 5000

# (text - its first line the table, {table} - and the problem after "not valid TOML")
TYPED = [
    (f"{{table}}\nrole = {LONG}\n",
     " at line 2, column 8: a number of 5000 characters is too long (at most 1000 digits)"),
    (f"{{table}}\nrole = [1,\n  {HEX}]\n",
     " at line 3, column 3: a number of 4002 characters is too long (at most 1000 digits)"),
    (f"{{table}}\nrole = {DEEP}\n", ": nested too deeply"),
    ("[x\n", " at line 1, column 3: Expected ']' at the end of a table declaration"),
    ("{table}\nrole = 2026-13-45\n",
     " at line 2, column 12: Expected newline or end of document after a statement"),
    ('{table}\nrole = "\\ud800"\n',
     " at line 2, column 15: Escaped character is not a Unicode scalar value"),
    ('{table}\nrole = "a', " at line 2, column 10: Unterminated string"),
]
IDS = ["long", "hex", "deep", "table", "date", "surrogate", "end"]


@pytest.mark.parametrize("text,problem", TYPED, ids=IDS)
def test_network_toml_names_where_it_cannot_be_read(text, problem):
    with pytest.raises(NetworkError) as caught:
        parse_network(text.replace("{table}", "[[interfaces]]"), "network.toml")
    assert [(p.code, p.path, p.message) for p in caught.value.problems] == [
        (NetworkCode.SYNTAX, "network.toml", f"not valid TOML{problem}")]


@pytest.mark.parametrize("text,problem", TYPED, ids=IDS)
def test_ha_toml_names_where_it_cannot_be_read(text, problem):
    with pytest.raises(HaError) as caught:
        ha_config.parse(text.replace("{table}", "[ha]"))
    assert [(p.code, p.path, p.message) for p in caught.value.problems] == [
        (ha_config.Code.SYNTAX, "", f"not valid TOML{problem}")]


@pytest.fixture
def tusk_toml(tmp_path):
    (tmp_path / "secret").write_text("s3cret\n")

    def write(data):
        path = tmp_path / "tusk.toml"
        path.write_bytes(data)
        return str(path)
    return write


GOOD = b'[web]\nsecret_key_file = "secret"\nallowed_hosts = ["fw"]\n[database]\nname = "t"\n' \
       b'user = "t"\n'


@pytest.mark.parametrize("data,problem", [
    (GOOD + b"port = " + LONG.encode() + b"\n", "not valid TOML at line 7, column 8: a "
     "number of 5000 characters is too long (at most 1000 digits)"),
    (GOOD + b"port = " + DEEP.encode() + b"\n", "not valid TOML: nested too deeply"),
    (GOOD.replace(b'"t"', b'"t\xe9"', 1), "not valid TOML at line 5, column 10: not UTF-8 "
     "text (byte 76)"),
    (b"[web\n", "not valid TOML at line 1, column 5: Expected ']' at the end of a table "
     "declaration"),
], ids=["long", "deep", "not-utf8", "table"])
def test_tusk_toml_names_where_it_cannot_be_read(tusk_toml, data, problem):
    path = tusk_toml(data)
    with pytest.raises(tusk_config.ConfigError) as caught:
        tusk_config.load(path)
    assert str(caught.value) == f"{path}: {problem}"


def test_a_decode_error_of_python_3_14_is_read_from_its_attributes():
    """Python 3.14's TOMLDecodeError carries msg, lineno and colno; 3.13's only says them."""
    error = tomllib.TOMLDecodeError("Invalid value (at line 1, column 5)")
    error.msg, error.lineno, error.colno = "Invalid value", 3, 9
    assert tomlread.decode_error(error, "").described() == \
        "not valid TOML at line 3, column 9: Invalid value"
    at_end = tomllib.TOMLDecodeError("Unterminated string (at end of document)")
    assert tomlread.decode_error(at_end, "a = 1\nb = \"x").described() == \
        "not valid TOML at line 2, column 7: Unterminated string"


def test_a_hexadecimal_number_too_long_to_print_is_refused_where_it_is_written():
    """int("f" * 4000, 16) has no limit, but printing it has: the message that named the
    bad MTU once raised ValueError instead."""
    text = '[[interfaces]]\nname = "eth0"\nmtu = 0x' + "f" * 4000 + "\n"
    with pytest.raises(NetworkError) as caught:
        parse_network(text, "network.toml")
    assert caught.value.message == ("not valid TOML at line 3, column 7: a number of 4002 "
                                    "characters is too long (at most 1000 digits)")
    with pytest.raises(HaError) as caught:
        ha_config.parse(text.replace("[[interfaces]]", "[ha]"))
    assert caught.value.message.startswith("not valid TOML at line 3, column 7: a number")
