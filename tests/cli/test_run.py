"""`m2cpp run` end to end: one-shot answers (-p, piped stdin) and the
interactive chat driven through a pseudo-terminal (/reset, /system,
multi-line input, Ctrl-C stopping a generation without quitting).

The model is a random-weight checkpoint (dummy weights) of the tiny shape
with the m2-mini tokenizer and the official chat template, so the text is
noise; what is checked is the chat mechanics."""
import json
import os
import pty
import select
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

SRC = os.environ.get("M2CPP_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("M2CPP_BINARY", os.path.join(SRC, "build", "m2cpp"))


@pytest.fixture(scope="module")
def model_dir():
    d = tempfile.mkdtemp(prefix="m2cpp_run_")
    tok = os.path.join(SRC, "tests", "data", "tokenizer", "m2-mini")
    for f in os.listdir(tok):
        if f.endswith(".json") or f.endswith(".jinja"):
            shutil.copy(os.path.join(tok, f), d)
    with open(os.path.join(SRC, "tests", "data", "m2-tiny-bf16", "config.json")) as f:
        cfg = json.load(f)
    cfg["vocab_size"] = 4096
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    yield d
    shutil.rmtree(d)


def run(args, stdin=None, env=None):
    return subprocess.run([BIN] + args, input=stdin, capture_output=True, text=True, timeout=120, env=env)


def test_prompt_answers_once(model_dir):
    r = run(["run", "-m", model_dir, "--load-format", "dummy", "-p", "Tell me about the sea.",
             "--max-tokens", "8", "--seed", "1"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("<think>\n")  # the reasoning block comes first, not a terminal: marked
    # The same seed gives the same answer.
    r2 = run(["run", "-m", model_dir, "--load-format", "dummy", "-p", "Tell me about the sea.",
              "--max-tokens", "8", "--seed", "1"])
    assert r2.stdout == r.stdout


def test_piped_stdin_answers_once(model_dir):
    r = run(["run", "-m", model_dir, "--load-format", "dummy", "--max-tokens", "4", "--seed", "3"], stdin="hello\n")
    assert r.returncode == 0, r.stderr
    assert "<think>" in r.stdout


def test_no_model_is_a_clear_error(model_dir):
    env = dict(os.environ, M2CPP_MODEL=os.path.join(model_dir, "missing"))
    r = run(["run", "-p", "hi"], env=env)
    assert r.returncode == 1
    assert "missing" in r.stderr


class Pty:
    """m2cpp run in a pseudo-terminal, as a person would use it."""

    def __init__(self, args):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execv(BIN, [BIN] + args)
        self.out = b""

    def read_until(self, needle, timeout=60):
        end = time.time() + timeout
        while needle.encode() not in self.out:
            left = end - time.time()
            assert left > 0, f"timed out waiting for {needle!r}; got {self.out[-400:]!r}"
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    self.out += os.read(self.fd, 65536)
                except OSError:
                    break
        return self.out

    def send(self, text):
        os.write(self.fd, text.encode())

    def close(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)


def test_interactive_chat(model_dir):
    p = Pty(["run", "-m", model_dir, "--load-format", "dummy", "--max-tokens", "6", "--seed", "5"])
    try:
        p.read_until("> ")
        p.send("first line \\\n")          # a trailing backslash continues the message
        p.read_until(". ")
        p.send("second line\n")
        p.read_until("\n> ")               # answered, prompt again
        p.send("/system Be brief.\n")
        p.read_until("system prompt set")
        p.send("/reset\n")
        p.read_until("conversation cleared")
        p.send('"""\nblock one\nblock two\n"""\n')
        p.read_until("\n> ")
        p.send("/exit\n")
        os.waitpid(p.pid, 0)
        p.pid = None
    finally:
        if p.pid:
            p.close()


def test_ctrl_c_stops_generation_without_quitting(model_dir):
    p = Pty(["run", "-m", model_dir, "--load-format", "dummy", "--max-tokens", "100000", "--seed", "6"])
    try:
        p.read_until("> ")
        p.send("go on forever\n")
        p.read_until("\x1b[2m")            # reasoning has started streaming (dimmed)
        time.sleep(0.5)
        os.kill(p.pid, signal.SIGINT)
        p.read_until("[stopped]")
        p.read_until("> ")                 # still running, prompting again
        p.send("/exit\n")
        _, status = os.waitpid(p.pid, 0)
        p.pid = None
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    finally:
        if p.pid:
            p.close()
