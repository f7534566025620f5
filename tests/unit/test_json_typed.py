"""JSON an operator hands in (tusklib/jsonread.py, the backup file's reader): what json
refuses, and what it reads into what nothing can store, is a JsonError with its line and
column - a key twice in one object, NaN, a number of 5000 digits (a plain ValueError
from int() without a place), 1e999999 (float("inf") without a word), bytes that are not
UTF-8. Plain Python."""
import pytest

from tusklib import jsonread


@pytest.mark.parametrize("text,expected", [
    ('{"a": 1,\n "b": [2, ' + "3" * 5000 + "]}",
     "not valid JSON at line 2, column 11: a number of 5000 digits is too long (at most 1000)"),
    ('{"a": -' + "3" * 1001 + "}",
     "not valid JSON at line 1, column 7: a number of 1001 digits is too long (at most 1000)"),
    ('[1,\n  1e999999]', "not valid JSON at line 2, column 3: '1e999999' is too large a number"),
    ('{"a": [{"b": 1, "b": 2}]}', "not valid JSON at line 1, column 8: the key 'b' appears "
     "twice in the object that starts here"),
    ('  {"b": 1, "b": 2}', "not valid JSON at line 1, column 3: the key 'b' appears twice in "
     "the object that starts here"),
    ('{"a": -Infinity}', "not valid JSON at line 1, column 7: -Infinity is not a JSON number"),
    ("12" + "3" * 1000, "not valid JSON at line 1, column 1: a number of 1002 digits is too "
     "long (at most 1000)"),
    ('{"a" 1}', "not valid JSON at line 1, column 6: Expecting ':' delimiter"),
    ("[" * 100_000, "not valid JSON: nested too deeply"),
])
def test_what_json_cannot_take_is_named_with_its_place(text, expected):
    with pytest.raises(jsonread.JsonError) as caught:
        jsonread.loads(text)
    assert caught.value.described() == expected


def test_bytes_that_are_not_utf8_are_named_with_their_place():
    with pytest.raises(jsonread.NotUtf8) as caught:
        jsonread.load_bytes(b'{"a":\n "caf\xe9"}')
    assert caught.value.described() == "not UTF-8 text at line 2, column 6 (byte 11)"


def test_good_json_reads_as_json_does():
    text = '{"a": [1, -2.5e3, "x\\u00e9", null, true, {"b": {}}], "c": ' + "9" * 1000 + "}"
    assert jsonread.loads(text) == {"a": [1, -2500.0, "xé", None, True, {"b": {}}],
                                    "c": int("9" * 1000)}
