"""The gateway never loads llama.cpp: it needs no model runtime, and with llama.cpp loaded (the control plane's
adapter checks imported it) its /ping stalled 70-85 ms under the largest PutMetricData load, against 50 ms allowed."""

from __future__ import annotations

import subprocess
import sys


def test_the_gateway_imports_no_llama_cpp() -> None:
    loaded = subprocess.run([sys.executable, "-c", "import sys, pier.gateway.app, pier.gateway.run; "
                             "print(sorted(m for m in sys.modules if m.startswith('llama_cpp')))"],
                            capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"
