"""The policy's YAML can only say what it says: anchors and aliases (&a, *a), which let
600 bytes expand to billions of values, are refused while the document is composed,
before anything is expanded; every value an error quotes is quoted shortened, so an
error is never larger than a few lines. Plain Python."""
import time

import pytest
from yamlbomb import bomb

from policy.core.errors import Code, PolicyError
from policy.core.normalise import load_policy_text, parse_yaml


def test_a_billion_laughs_is_refused_at_its_first_anchor_at_once():
    text = bomb(9)  # 9^9 = 387 million strings, as in issue 16
    assert len(text) < 700
    started = time.monotonic()
    with pytest.raises(PolicyError) as caught:
        load_policy_text(text)
    assert time.monotonic() - started < 1
    assert caught.value.code == Code.SYNTAX and caught.value.path == ""
    assert caught.value.message == ("not valid YAML at line 1, column 4: anchors and aliases "
                                    "(&name, *name) are not accepted: write the value out")


@pytest.mark.parametrize("text,column", [
    ("zones: [{name: lan, interfaces: [eth1]}]\nclasses: *x\n", 10),
    ("zones:\n  - &z {name: lan, interfaces: [eth1]}\n", 5),
    ("zones: [{name: lan, interfaces: [&i eth1]}]\n", 34),
])
def test_any_anchor_or_alias_is_refused_with_its_place(text, column):
    with pytest.raises(PolicyError) as caught:
        parse_yaml(text)
    assert caught.value.code == Code.SYNTAX
    assert f"column {column}: anchors and aliases" in caught.value.message


def test_a_document_nested_too_deeply_is_a_syntax_error():
    with pytest.raises(PolicyError) as caught:
        parse_yaml("[" * 100_000 + "]" * 100_000)
    assert caught.value.code == Code.SYNTAX
    assert caught.value.message == "not valid YAML: nested too deeply"


LONG = "x" * 100_000
SHORT = "'" + "x" * 56 + "..."  # repr(LONG), cut to 60 characters


@pytest.mark.parametrize("text,path,message", [
    (f"zones: [{{name: {LONG}, interfaces: [eth1]}}]\n", "zones[0].name",
     f"{SHORT} is not a valid name"),
    (f"version: {LONG}\n", "version", f"{SHORT} is not supported"),
    (f"address_sets: [{{name: a, entries: [{LONG}]}}]\n", "address_sets[0].entries[0]",
     f"{SHORT} is not a valid IPv4 or IPv6 address"),
    (f"? {LONG}\n: 1\n", "x" * 57 + "...", "unknown key"),
    (f"? {LONG}\n: 1\n? {LONG}\n: 2\n", "", f"not valid YAML at line 3, column 3: "
     f"duplicate key {SHORT}"),
], ids=["name", "version", "address", "key", "duplicate key"])
def test_a_long_value_is_quoted_shortened(text, path, message):
    with pytest.raises(PolicyError) as caught:
        load_policy_text(text)
    problem = caught.value.problems[0]
    assert problem.path == path
    assert problem.message.startswith(message) and len(problem.message) < 200, problem.message


# -- scalars a person can type: every one is a value or a SYNTAX error at its place ----------

ZONE = "zones: [{name: lan, interfaces: [eth1], comment: %s}]\n"


@pytest.mark.parametrize("typed", ["2026-05-04", "2026-13-45", "2026-02-30",
                                   "2026-05-04 25:00:00", "2026-05-04T10:00:00+99:00"])
def test_a_date_is_the_text_the_operator_typed(typed):
    policy = load_policy_text(ZONE % typed)
    assert policy.zones[0].comment == typed


# (the value typed after "version: ", the column where it starts, the message after it)
UNREADABLE = [
    ("9" * 5000, "'99999999999999999999999999999999999999999999999999999999... is too long "
     "for a number: 5000 characters, at most 1000"),
    ("0x" + "f" * 5000, "'0xffffffffffffffffffffffffffffffffffffffffffffffffffffff... is too "
     "long for a number: 5002 characters, at most 1000"),
    ("1" + "_0" * 3000, "'1_0_0_0_0_0_0_0_0_0_0_0_0_0_0_0_0_0_0_0_0_0_0_0_0_0_0_0_... is too "
     "long for a number: 6001 characters, at most 1000"),
    ("!!int x", "'x' is not a whole number"),
    ("!!int", "'' is not a whole number"),
    ("!!int 0b", "'0b' is not a whole number"),
    ("!!int _", "'_' is not a whole number"),
    ("!!float .", "'.' is not a number"),
    ("!!float", "'' is not a number"),
    ("!!bool maybe", "'maybe' is not true or false"),
    ("!!map x", "'x' is not a mapping"),
    ("!!timestamp 2026-13-45", "the tag !!timestamp is not accepted: a policy holds text, "
     "numbers, true/false, lists and mappings"),
    ("!!timestamp x", "the tag !!timestamp is not accepted"),
    ("!!binary QUJD", "the tag !!binary is not accepted"),
    ("!!set {a}", "the tag !!set is not accepted"),
    ("!!omap [a: 1]", "the tag !!omap is not accepted"),
    ("!!pairs [a: 1]", "the tag !!pairs is not accepted"),
    ("!!python/object:os.system x", "the tag !!python/object:os.system is not accepted"),
    ("!mine x", "the tag !mine is not accepted"),
    ('"\\ud800"', "'\\ud800' holds half of a UTF-16 surrogate pair (\\ud800), which is no "
     "character"),
    ("{a: !!int x}", "'x' is not a whole number"),
]


@pytest.mark.parametrize("typed,message", UNREADABLE, ids=[t[:20] for t, _ in UNREADABLE])
def test_a_scalar_that_cannot_be_read_is_a_syntax_error_at_its_place(typed, message):
    text = f"zones: []\nversion: {typed}\n"
    with pytest.raises(PolicyError) as caught:
        load_policy_text(text)
    assert caught.value.code == Code.SYNTAX and caught.value.path == ""
    column = 10 + (typed.index("!!int") if typed.startswith("{") else 0)
    assert caught.value.message.startswith(f"not valid YAML at line 2, column {column}: "
                                           f"{message}"), caught.value.message
    assert len(caught.value.message) < 200


def test_a_merge_key_is_only_a_key():
    with pytest.raises(PolicyError) as caught:
        load_policy_text("zones: []\n<<: {version: 1}\n")
    assert [str(p) for p in caught.value.problems] == [
        "<<: unknown key (allowed: address_sets, classes, nat, services, settings, version, "
        "zones)"]


def test_an_explicit_merge_tag_is_refused_at_its_place():
    with pytest.raises(PolicyError) as caught:
        parse_yaml("zones: []\n!!merge <<: {version: 1}\n")
    assert caught.value.message.startswith("not valid YAML at line 2, column 1: the tag "
                                           "!!merge is not accepted")


@pytest.mark.parametrize("text,line,column,character", [
    ("zones: []\nversion: 1\x00\n", 2, 11, "#x0000"),
    ("zones: [\n  {name: a\ud800}]\n", 2, 11, "#xd800"),
    ("a: 1\r\nb: \x07\n", 2, 4, "#x0007"),
])
def test_a_character_yaml_does_not_allow_is_named_with_its_place(text, line, column,
                                                                   character):
    with pytest.raises(PolicyError) as caught:
        parse_yaml(text)
    assert caught.value.code == Code.SYNTAX
    assert caught.value.message == (f"not valid YAML at line {line}, column {column}: the "
                                    f"character {character} is not allowed")


@pytest.mark.parametrize("typed,expected", [
    ("!!str 2026-13-45", "2026-13-45"), ("'0x10'", "0x10"), ("0x10", 16), ("0o10", "0o10"),
    ("010", 8), ("1_000", 1000), ("1:30", 90), ("1.5e+3", 1500.0), ("1.5e3", "1.5e3"),
    (".inf", float("inf")), ("1e999999", "1e999999"), ("~", None), ("yes", True),
    ("!!int '12'", 12),
])
def test_the_scalars_a_policy_may_hold_read_as_before(typed, expected):
    assert parse_yaml(f"a: {typed}\n") == {"a": expected}


def test_an_escape_beyond_unicode_is_a_syntax_error_at_its_place():
    with pytest.raises(PolicyError) as caught:
        parse_yaml('a: [1, "x\\U00110000"]\n')
    assert caught.value.message == "not valid YAML at line 1, column 12: cannot be read here"
