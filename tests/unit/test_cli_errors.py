"""The CLI as an operator runs it: every policy error prints `error[CODE]: path: message`
on stderr and exits with the code's number. No kernel is asked (check --no-kernel, print)."""
import os

import pytest
from tuskcli import run_tusk

from lab.paths import ROOT
from policy.core.errors import Code

EXAMPLE = os.path.join(ROOT, "webui", "policy", "examples", "tusk.yaml")

FOUR_CLASSES = """\
version: 1
zones:
  - {name: inside, interfaces: [eth1]}
  - {name: outside, interfaces: [eth2]}
services:
  - {name: ssh, protocol: tcp, ports: [22]}
  - {name: web, protocol: tcp, ports: [80, 443]}
classes:
  - {name: admin, from: inside, to: outside, services: [ssh], action: accept}
  - {name: web, from: inside, to: outside, services: [web], action: accept}
  - {name: back, from: outside, to: inside, action: drop}
  - {name: rest, from: inside, to: outside, action: accept, mss: {mode: fixed, value: %s}}
"""

# (id, file content or None for a missing file, code, the first stderr line)
BAD_FILES = [
    ("range", FOUR_CLASSES % 70000, Code.RANGE,
     "error[RANGE]: classes[3].mss.value: 70000 is above 65535"),
    ("syntax", "version: 1\nzones: [inside\n", Code.SYNTAX,
     "error[SYNTAX]: not valid YAML at line"),
    ("duplicate-key", "version: 1\nversion: 1\n", Code.SYNTAX,
     "error[SYNTAX]: not valid YAML at line 2, column 1: duplicate key 'version'"),
    ("schema", "version: 1\nzone: []\n", Code.SCHEMA, "error[SCHEMA]: zone: unknown key"),
    ("reference", FOUR_CLASSES.replace("to: inside", "to: lan") % 1400, Code.REFERENCE,
     "error[REFERENCE]: classes[2].to: no zone is named 'lan'"),
    ("duplicate", FOUR_CLASSES.replace("name: back", "name: web") % 1400, Code.DUPLICATE,
     "error[DUPLICATE]: classes[2].name: 'web' is already defined at classes[1]"),
    ("address", "address_sets:\n  - {name: a, entries: [10.0.0.1/24]}\n", Code.ADDRESS,
     "error[ADDRESS]: address_sets[0].entries[0]: '10.0.0.1/24' has host bits set; "
     "the prefix is 10.0.0.0/24"),
    ("contradiction", FOUR_CLASSES.replace("action: drop", "action: drop, mss: {mode: pmtu}")
     % 1400, Code.CONTRADICTION,
     "error[CONTRADICTION]: classes[2].mss: only accepted traffic can be modified; "
     "the action is drop"),
    ("missing-file", None, Code.IO, "error[IO]: cannot read "),
]


def write(tmp_path, content):
    path = tmp_path / "policy.yaml"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    return path


@pytest.mark.parametrize("command", [["check", "--no-kernel"], ["print"]], ids=["check", "print"])
@pytest.mark.parametrize("content, code, first_line", [c[1:] for c in BAD_FILES],
                         ids=[c[0] for c in BAD_FILES])
def test_bad_file_exits_with_its_code(tmp_path, command, content, code, first_line):
    path = write(tmp_path, content)
    result = run_tusk(*command, path)
    assert result.returncode == int(code), (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert lines and lines[0].startswith(first_line), result.stderr
    assert result.stdout == "", "nothing may be printed for a policy that is refused"
    assert "Traceback" not in result.stderr


def test_the_exact_range_error(tmp_path):
    result = run_tusk("check", "--no-kernel", write(tmp_path, FOUR_CLASSES % 70000))
    assert result.returncode == 14
    assert result.stderr == "error[RANGE]: classes[3].mss.value: 70000 is above 65535\n"


def test_missing_file_names_the_file_and_the_reason(tmp_path):
    missing = tmp_path / "nowhere" / "policy.yaml"
    for command in (["check", "--no-kernel"], ["print"]):
        result = run_tusk(*command, missing)
        assert result.returncode == 27
        assert result.stderr == f"error[IO]: cannot read {missing}: No such file or directory\n"


def test_directory_instead_of_file_is_an_io_error(tmp_path):
    result = run_tusk("check", "--no-kernel", tmp_path)
    assert result.returncode == int(Code.IO), result.stderr
    assert result.stderr.startswith("error[IO]: cannot read ")


def test_file_not_utf8_is_a_syntax_error(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_bytes(b"zones:\n  - {name: caf\xe9, interfaces: [eth1]}\n")
    result = run_tusk("print", path)
    assert result.returncode == int(Code.SYNTAX)
    assert "is not UTF-8 text" in result.stderr


def test_every_problem_is_printed_and_the_first_sets_the_status(tmp_path):
    text = (FOUR_CLASSES % 70000).replace("version: 1",
                                          "version: 1\nsettings: {confirm_timeout: 5}")
    text = text.replace("to: inside", "to: lan")
    result = run_tusk("check", "--no-kernel", write(tmp_path, text))
    assert result.returncode == int(Code.RANGE)
    assert result.stderr.splitlines() == [
        "error[RANGE]: settings.confirm_timeout: 5 is below 10",
        "error[REFERENCE]: classes[2].to: no zone is named 'lan'",
        "error[RANGE]: classes[3].mss.value: 70000 is above 65535",
    ]


def test_many_problems_are_capped(tmp_path):
    entries = ", ".join(f"10.0.{i}.1/24" for i in range(60))
    result = run_tusk("check", "--no-kernel",
                      write(tmp_path, f"address_sets:\n  - {{name: a, entries: [{entries}]}}\n"))
    assert result.returncode == int(Code.ADDRESS)
    lines = result.stderr.splitlines()
    assert len(lines) == 51
    assert all(line.startswith("error[ADDRESS]: address_sets[0].entries[") for line in lines[:50])
    assert lines[50] == "... and 10 more"


def test_valid_file_checks_and_prints(tmp_path):
    path = write(tmp_path, FOUR_CLASSES % 1400)
    result = run_tusk("check", "--no-kernel", path)
    assert (result.returncode, result.stdout, result.stderr) == (0, f"{path}: valid\n", "")
    result = run_tusk("print", path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# Rendered by Tusk")
    assert "tcp option maxseg size set 1400" in result.stdout
    # table tusk whole, then the hardware fast path's table deleted (no class has hardware),
    # then the bridges' table, which drops all (no bridged zone)
    assert "}\ntable inet tusk_offload\ndelete table inet tusk_offload\n" in result.stdout
    assert result.stdout.endswith('policy drop;\n\t\tcounter comment "tusk: no bridged zone - '
                                  'nothing crosses a bridge"\n\t}\n}\n')


def test_shipped_example_prints(tmp_path):
    result = run_tusk("print", EXAMPLE)
    assert result.returncode == 0, result.stderr
    assert "table inet tusk {" in result.stdout


# What a person can type that PyYAML's resolvers once turned into a traceback (issue 34):
# a date is the text typed; a value that cannot be read is a SYNTAX error at its place.
TYPED = [
    ("long-number", "version: " + "9" * 5000 + "\n",
     "error[SYNTAX]: not valid YAML at line 1, column 10: '9999999999999999999999999999999999"
     "9999999999999999999999... is too long for a number: 5000 characters, at most 1000"),
    ("impossible-date", "zones:\n  - {name: lan, interfaces: [eth1], comment: "
     "!!timestamp 2026-13-45}\n",
     "error[SYNTAX]: not valid YAML at line 2, column 46: the tag !!timestamp is not "
     "accepted: a policy holds text, numbers, true/false, lists and mappings"),
    ("not-a-number", "settings:\n  log_rate: !!int fifty\n",
     "error[SYNTAX]: not valid YAML at line 2, column 13: 'fifty' is not a whole number"),
    ("half-a-character", 'zones:\n  - {name: lan, interfaces: [eth1], comment: "\\udc80"}\n',
     "error[SYNTAX]: not valid YAML at line 2, column 46: '\\udc80' holds half of a UTF-16 "
     "surrogate pair (\\udc80), which is no character"),
]


@pytest.mark.parametrize("command", [["check", "--no-kernel"], ["print"]], ids=["check", "print"])
@pytest.mark.parametrize("content, expected", [c[1:] for c in TYPED], ids=[c[0] for c in TYPED])
def test_a_value_that_cannot_be_read_is_a_syntax_error_with_its_line_and_column(
        tmp_path, command, content, expected):
    result = run_tusk(*command, write(tmp_path, content))
    assert (result.returncode, result.stderr, result.stdout) == (int(Code.SYNTAX),
                                                                 expected + "\n", "")


@pytest.mark.parametrize("date", ["2026-05-04", "2026-13-45", "2026-02-30"])
def test_a_date_typed_as_a_comment_is_that_comment(tmp_path, date):
    path = write(tmp_path, f"zones:\n  - {{name: lan, interfaces: [eth1], comment: {date}}}\n")
    result = run_tusk("check", "--no-kernel", path)
    assert (result.returncode, result.stdout, result.stderr) == (0, f"{path}: valid\n", "")
