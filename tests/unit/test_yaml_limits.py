"""The policy's YAML can only say what it says: anchors and aliases (&a, *a), which let
600 bytes expand to billions of values, are refused while the document is composed,
before anything is expanded; every value an error quotes is quoted shortened, so an
error is never larger than a few lines. Plain Python."""
import time

import pytest

from policy.core.errors import Code, PolicyError
from policy.core.normalise import load_policy_text, parse_yaml
from yamlbomb import bomb


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
