"""docs/python.md's example (python/examples/quickstart.py) runs and prints what the page says."""

import os
import subprocess
import sys

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "python", "examples", "quickstart.py")


def test_quickstart_runs():
    result = subprocess.run([sys.executable, EXAMPLE], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "(2, 8, 100, 64) float32 (2, 8, 100)"
