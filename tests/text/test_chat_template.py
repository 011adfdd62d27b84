"""Differential test: `m2cpp template` against Python jinja2 set up as Hugging
Face transformers renders chat templates (tools/chat_template_ref.py), over a
deterministic corpus of OpenAI requests (tools/chat_corpus.py), for the
official MiniMax-M2 template and the Qwen3 and DeepSeek-V3 templates (which
exercise other constructs), plus a template of our own that uses the rest.

Renders must be byte-identical. Where jinja2 raises, m2cpp must fail too and
its error must contain jinja2's message.
"""

import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

import pytest

SOURCE_DIR = os.environ.get("M2CPP_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.environ.get("M2CPP_BINARY")
sys.path.insert(0, os.path.join(SOURCE_DIR, "tools"))

import chat_corpus  # noqa: E402
import chat_template_ref  # noqa: E402

FIXTURES = os.path.join(SOURCE_DIR, "tests", "data", "chat_templates")
# (fixture, number of conversations)
CASES = [("minimax-m2", 600), ("qwen3", 250), ("deepseek-v3", 250), ("kitchen-sink", 250)]

pytestmark = pytest.mark.skipif(not BINARY or not os.path.exists(BINARY), reason="M2CPP_BINARY not built")


def run_m2cpp(model_dir, request, workdir, index):
    path = os.path.join(workdir, f"req{index}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(request, f, ensure_ascii=False)
    proc = subprocess.run(
        [BINARY, "template", "-m", model_dir, "--request", path], capture_output=True, timeout=60
    )
    return proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8", "replace")


def reference(model_dir, request):
    try:
        return chat_template_ref.render_request(model_dir, request), None
    except Exception as e:  # the template (or jinja2) refused the conversation
        return None, f"{type(e).__name__}: {e}"


def jinja_message(error):
    """The part of a jinja2/Python error message m2cpp must repeat."""
    return error.split(": ", 1)[1]


@pytest.mark.parametrize("fixture,count", CASES)
def test_corpus_renders_identically(fixture, count):
    model_dir = os.path.join(FIXTURES, fixture)
    requests = chat_corpus.conversations(count)
    with tempfile.TemporaryDirectory() as workdir, concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda ir: run_m2cpp(model_dir, ir[1], workdir, ir[0]), enumerate(requests)))
    rendered = failed = 0
    mismatches = []
    for i, (request, (rc, out, err)) in enumerate(zip(requests, results)):
        want, want_error = reference(model_dir, request)
        if want_error is None:
            if rc != 0 or out != want:
                mismatches.append((i, want, out if rc == 0 else "ERROR " + err))
            rendered += 1
        else:
            if rc == 0 or jinja_message(want_error) not in err:
                mismatches.append((i, want_error, out if rc == 0 else err))
            failed += 1
    detail = "\n".join(f"#{i}: want {w!r}\n     got  {g!r}" for i, w, g in mismatches[:3])
    assert not mismatches, f"{len(mismatches)}/{len(requests)} differ for {fixture}:\n{detail}"
    assert rendered > count // 2, f"too few successful renders for {fixture}: {rendered}"
    print(f"{fixture}: {rendered} identical renders, {failed} identical refusals")
