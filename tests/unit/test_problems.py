"""One shape for "what is wrong" (webui/tusklib/problems.py): every domain's error is a
Problems exception of Problem(code, path, message), every CLI prints them the same way
and exits with the first code, and a web form puts each next to its field."""
import io
import os
import subprocess
import sys

import pytest
from django import forms

from appliance import network
from backup import document as backups
from diag.core import capture
from lab.paths import ROOT
from policy.core.errors import Code, PolicyError
from policy.core.normalise import load_policy_text
from tuning.core import profile as profiles
from tuning.core.errors import TuneError
from tusklib.problems import Problem, Problems, ProblemsFormMixin, report

BIN = os.path.join(ROOT, "webui", "bin")


def raised(function, *args):
    with pytest.raises(Problems) as caught:
        function(*args)
    return caught.value


def bad_profile(tmp_path):
    (tmp_path / "mine.conf").write_text("[rings]\nrx = lots\n")
    return profiles.load("mine", [str(tmp_path)])


@pytest.mark.parametrize("make, kind, first", [
    (lambda tmp: load_policy_text("version: 1\nzone: []\n"), PolicyError,
     Problem(Code.SCHEMA, "zone", "unknown key")),
    (bad_profile, TuneError, None),
    (lambda tmp: network.parse('[management]\ninterface = "eth/0"\n', "n.toml"),
     network.NetworkError, Problem(network.Code.VALUE, "n.toml: [management] interface",
                                   "'eth/0' contains '/', which Linux does not allow in an "
                                   "interface name")),
    (lambda tmp: backups.parse(b"[1,"), backups.BackupError, None),
    (lambda tmp: capture.validate(capture.Spec(interfaces=())), capture.SpecError,
     Problem(capture.Code.INTERFACE, "interfaces", "choose at least one interface")),
], ids=["policy", "tuning", "network", "backup", "capture"])
def test_every_domain_raises_problems_of_one_shape(tmp_path, make, kind, first):
    error = raised(make, tmp_path)
    assert type(error) is kind
    assert error.problems and all(isinstance(p, Problem) for p in error.problems)
    assert list(error) == error.problems and error.code == error.problems[0].code
    assert isinstance(error.code, kind.codes)
    if first is not None:
        assert (first.code, first.path) == (error.code, error.path)
        assert error.message.startswith(first.message), error.message
    assert str(error).splitlines() == [f"error[{p.code.name}]: {p}" for p in error.problems]


def test_a_number_becomes_the_domains_code_and_an_empty_list_is_refused():
    error = TuneError(31, "[rings] rx", "not a number")
    assert error.problems == [Problem(TuneError.codes.VALUE, "[rings] rx", "not a number")]
    assert str(error) == "error[VALUE]: [rings] rx: not a number"
    assert str(Problem(Code.IO, "", "cannot read x")) == "cannot read x"
    with pytest.raises(ValueError, match="PolicyError needs at least one problem"):
        PolicyError([])


def test_report_prints_one_line_a_problem_and_counts_the_rest():
    error = PolicyError([Problem(Code.RANGE, f"classes[{i}].mss.value", "70000 is above 65535")
                         for i in range(4)] + [Problem(Code.SYNTAX, "", "late")])
    stream = io.StringIO()
    assert report(error, stream, limit=3) == 14
    assert stream.getvalue().splitlines() == [
        "error[RANGE]: classes[0].mss.value: 70000 is above 65535",
        "error[RANGE]: classes[1].mss.value: 70000 is above 65535",
        "error[RANGE]: classes[2].mss.value: 70000 is above 65535",
        "... and 2 more"]


@pytest.mark.parametrize("argv, code", [
    (["tusk", "policy", "check", "--no-kernel", "BAD"], Code.SCHEMA),
    (["tusk-tune", "--no-policy", "--netns", "tusk-no-such-ns", "plan", "throughput"],
     TuneError.codes.TARGET),
    (["tusk-net", "check", "BAD"], network.Code.SCHEMA),
], ids=["tusk-policy", "tusk-tune", "tusk-net"])
def test_every_cli_prints_problems_alike_and_exits_with_the_first_code(tmp_path, argv, code):
    bad = tmp_path / "bad"
    bad.write_text("version: 1\nzone: []\n" if argv[0] == "tusk" else "[managment]\n")
    argv = [str(bad) if arg == "BAD" else arg for arg in argv]
    result = subprocess.run([sys.executable, os.path.join(BIN, argv[0]), *argv[1:]],
                            capture_output=True, text=True)
    assert (result.returncode, result.stdout) == (code, ""), result.stderr
    lines = result.stderr.splitlines()
    assert lines and lines[0].startswith(f"error[{code.name}]: "), result.stderr
    assert all(line.startswith("error[") and "]: " in line for line in lines), result.stderr


class ItemForm(ProblemsFormMixin, forms.Form):
    name = forms.CharField()
    entries = forms.CharField()
    mss_value = forms.IntegerField()
    problem_fields = {"name": "name", "entries": "entries", "mss.value": "mss_value"}


def test_the_form_mixin_puts_each_problem_next_to_its_field():
    form = ItemForm({"name": "web", "entries": "x", "mss_value": "1"})
    assert form.is_valid()
    form.add_problems(PolicyError([
        Problem(Code.RANGE, "classes[3].mss.value", "70000 is above 65535"),
        Problem(Code.ADDRESS, "classes[3].entries[2]", "'x' is not an address"),
        Problem(Code.SCHEMA, "classes[3].colour", "unknown key"),
        Problem(Code.CONTRADICTION, "classes[3]", "the item as a whole"),
        Problem(Code.REFERENCE, "classes[1].to", "no zone is named 'lan'"),
    ]), within="classes[3]")
    assert form.errors == {
        "mss_value": ["70000 is above 65535"],
        "entries": ["entries[2]: 'x' is not an address"],
        "__all__": ["colour: unknown key", "the item as a whole",
                    "classes[1].to: no zone is named 'lan'"]}


def test_an_empty_prefix_takes_every_problem():
    class ProfileForm(ProblemsFormMixin, forms.Form):
        profile = forms.CharField()
        problem_fields = {"": "profile"}

    form = ProfileForm({"profile": "mine"})
    assert form.is_valid()
    form.add_problems(TuneError([Problem(TuneError.codes.VALUE, "/etc/mine.conf [rings] rx",
                                         "not a number"),
                                 Problem(TuneError.codes.PROFILE, "", "no profile 'x'")]))
    assert form.errors == {"profile": ["/etc/mine.conf [rings] rx: not a number",
                                       "no profile 'x'"]}
