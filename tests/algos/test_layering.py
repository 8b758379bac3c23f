"""The trainer's modules import in one direction: the core's policies never reach back into a module that imports them."""

from __future__ import annotations

import subprocess
import sys


def test_backend_and_model_loading_import_no_policy_module():
    # textgym.policies.model imports these lazily (ModelPolicy.load); they must not import it back.
    code = (
        "import sys, textgym.algos.backends, textgym.algos.models, textgym.algos.token_envs; "
        "print(sorted(m for m in sys.modules if m.startswith('textgym.policies')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_library_modules_take_argument_helpers_from_their_own_module():
    code = "import sys, textgym.algos.flags, textgym.evaluate.command, textgym.serve.command; print('textgym.cli' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
