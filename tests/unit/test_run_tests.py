"""tools/run-tests' accounting of a whole run: each part's CPU time, its descendants'
included (the sessions' QEMU boots, the builds' compilers)."""
import importlib.machinery
import importlib.util
import subprocess
import sys

from lab.paths import ROOT


def run_tests():
    loader = importlib.machinery.SourceFileLoader("run_tests", str(ROOT / "tools" / "run-tests"))
    spec = importlib.util.spec_from_loader("run_tests", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_a_parts_cpu_time_counts_the_grandchildren_it_waited_for():
    burn = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass"
    parent = subprocess.Popen([sys.executable, "-c",
                               f"import subprocess, sys; subprocess.run([sys.executable, '-c', "
                               f"{burn!r}]); sys.exit(3)"])
    status, cpu = run_tests().finished(parent)
    assert status == 3 and parent.returncode == 3
    assert 0.4 <= cpu < 5, cpu
