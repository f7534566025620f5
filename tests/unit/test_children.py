"""tusklib.children: the one way the agent runs a child that answers in JSON (tusk-tune,
the capture analysis, the self-test's measurement), against real child processes."""
import contextlib
import os
import subprocess
import sys
import time

import pytest

from tusklib import children

# A chatty child: 2 MB on stderr (a full pipe holds 64 KiB) around its JSON on stdout.
CHATTY = """
import json, sys
for n in range(3):
    sys.stderr.write("warning: " + "x" * 100_000 + "\\n" * 10 * 1000)
    print(json.dumps({"progress": n * 40, "message": f"step {n}"}), flush=True)
sys.stderr.flush()
print(json.dumps({"result": {"ok": True}}))
"""


def python(code):
    return [sys.executable, "-c", code]


def test_run_json_reads_a_chatty_childs_stderr_while_it_runs():
    code = "import sys; sys.stderr.write('x' * 2_000_000); print('{\"report\": 1}')"
    assert children.run_json(python(code), timeout=30) == {"report": 1}


def test_json_lines_yields_each_line_of_a_chatty_child_and_drains_its_stderr():
    started = time.monotonic()
    seen = []
    for message in children.json_lines(python(CHATTY)):
        assert time.monotonic() - started < 30, "the child stalled on its full stderr pipe"
        if message is not None:
            seen.append(message)
    assert seen == [{"progress": 0, "message": "step 0"}, {"progress": 40, "message": "step 1"},
                    {"progress": 80, "message": "step 2"}, {"result": {"ok": True}}]


@pytest.mark.parametrize("code, status, reason", [
    ("import sys; sys.exit('error: no route to 192.0.2.1')", 1, "exited with status 1"),
    ("print('not json')", 0, "printed no JSON"),
    ("import os; os.kill(os.getpid(), 9)", -9, "exited with status -9"),
])
def test_run_json_names_how_the_child_failed_with_its_stderr(code, status, reason):
    with pytest.raises(children.ChildFailed) as failed:
        children.run_json(python(code), timeout=30)
    assert (failed.value.status, failed.value.reason) == (status, reason)
    if status == 1:
        assert str(failed.value) == "error: no route to 192.0.2.1"


def test_run_json_accepts_the_statuses_it_is_told_are_answers():
    code = "import sys; print('{\"drift\": 2}'); sys.exit(1)"
    assert children.run_json(python(code), timeout=30, ok=(0, 1)) == {"drift": 2}


def test_run_json_stops_a_child_that_overruns_its_timeout():
    with pytest.raises(subprocess.TimeoutExpired):
        children.run_json(python("import time; time.sleep(60)"), timeout=0.5)


@pytest.mark.parametrize("code, reason", [
    ("import sys; print('{\"progress\": 1}', flush=True); sys.exit('error: refused')",
     "exited with status 1"),
    ("print('{\"progress\": 1}'); print('Traceback (most recent call last):')",
     "printed a line that is not JSON: b'Traceback (most recent call last):'"),
])
def test_json_lines_fails_with_the_childs_stderr_and_status(code, reason):
    seen = []
    with pytest.raises(children.ChildFailed) as failed:
        seen.extend(m for m in children.json_lines(python(code)) if m is not None)
    assert seen == [{"progress": 1}]
    assert failed.value.reason == reason


def test_closing_json_lines_stops_the_child(tmp_path):
    pid_file = tmp_path / "pid"
    code = (f"import json, os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
            "print(json.dumps({'progress': 0}), flush=True); time.sleep(60)")
    # poll shorter than the child's start: the generator says None (nothing yet) first,
    # as it did on a loaded machine where the child took over 0.1 s to print
    messages = children.json_lines(python(code), poll=0.001)
    with contextlib.closing(messages):
        assert next(messages) is None
        assert next(message for message in messages if message is not None) == \
            {"progress": 0}
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):   # reaped, not merely signalled
        os.kill(pid, 0)
