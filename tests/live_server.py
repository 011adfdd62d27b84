"""A live `m2cpp serve` for the tests that talk to one (tests/server/ and
tests/loadgen/): the tiny chat fixture model (tests/data/m2-tiny-chat),
started on a free port, waited for on /health, stopped with SIGTERM (whose
exit status also checks the graceful shutdown); its access log and
/metrics read back. Each folder's conftest.py puts tests/ on sys.path."""
import json
import os
import re
import signal
import subprocess
import tempfile
import time

import httpx

SOURCE_DIR = os.environ.get("M2CPP_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("M2CPP_BINARY", os.path.join(SOURCE_DIR, "build", "m2cpp"))
MODEL = os.path.join(SOURCE_DIR, "tests", "data", "m2-tiny-chat")
MODEL_NAME = "m2-tiny-chat"


class ServerProcess:
    def __init__(self, *extra_args, env=None, preexec_fn=None):
        self.log = tempfile.NamedTemporaryFile(prefix="m2cpp-serve-", suffix=".log", delete=False)
        args = [BINARY, "serve", "-m", MODEL, "--port", "0", "--served-model-name", MODEL_NAME,
                "--threads", "1", "--kv-cache-dtype", "f32", *extra_args,
                # e.g. "--device cuda" to run a suite against the GPU backend
                *os.environ.get("M2CPP_TEST_SERVE_ARGS", "").split()]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self.log,
                                     env={**os.environ, **(env or {})}, preexec_fn=preexec_fn)
        self.port = self._wait_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._wait_healthy()

    def log_text(self):
        with open(self.log.name, encoding="utf-8", errors="replace") as f:
            return f.read()

    def _wait_port(self):
        deadline = time.time() + 60
        while time.time() < deadline:
            m = re.search(r"listening on http://[^:]+:(\d+)", self.log_text())
            if m:
                return int(m.group(1))
            if self.proc.poll() is not None:
                raise RuntimeError("m2cpp serve exited:\n" + self.log_text())
            time.sleep(0.02)
        raise RuntimeError("m2cpp serve did not start:\n" + self.log_text())

    def _wait_healthy(self):
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if httpx.get(self.url + "/health", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError("m2cpp serve exited:\n" + self.log_text())
            time.sleep(0.05)
        raise RuntimeError("m2cpp serve never became healthy:\n" + self.log_text())

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise
        return self.proc.returncode

    def rss_bytes(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def cpu_seconds(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime

    def access_records(self):
        out = []
        for line in self.log_text().splitlines():
            if line.startswith("{") and '"event":"access"' in line:
                out.append(json.loads(line))
        return out

    def metric(self, name, labels=None):
        """The value of one sample of /metrics (None when absent)."""
        text = httpx.get(self.url + "/metrics", timeout=10).text
        for line in text.splitlines():
            if line.startswith("#"):
                continue
            m = re.match(r"^([^\s{]+)(\{[^}]*\})?\s+(\S+)$", line)
            if not m or m.group(1) != name:
                continue
            if labels:
                got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
                if any(got.get(k) != v for k, v in labels.items()):
                    continue
            return float(m.group(3))
        return None


# Replay outputs (below) that several suites use: one tool call with two
# arguments, and two parallel calls (after visible text).
REPLAY_WEATHER_CALL = {"match": "TOOLTEST_WEATHER", "output":
    "The user wants the weather. I will call the tool.</think>\n\n<minimax:tool_call>\n"
    "<invoke name=\"get_weather\">\n<parameter name=\"location\">Paris</parameter>\n"
    "<parameter name=\"days\">2</parameter>\n</invoke>\n</minimax:tool_call>[e~["}
REPLAY_PARALLEL_CALLS = {"match": "TOOLTEST_PARALLEL", "output":
    "Two cities, two calls.</think>\n\nChecking both cities.\n<minimax:tool_call>\n"
    "<invoke name=\"get_weather\">\n<parameter name=\"location\">Paris</parameter>\n</invoke>\n"
    "<invoke name=\"get_weather\">\n<parameter name=\"location\">Tokyo</parameter>\n"
    "<parameter name=\"days\">3</parameter>\n</invoke>\n</minimax:tool_call>[e~["}


def replay_server(outputs, *extra_args, **kwargs):
    """A ServerProcess whose engine replays fixed raw M2 outputs instead of the
    model (`--replay`): `outputs` is the file's list of {"match": marker,
    "output": raw text}, the first whose marker the prompt contains answers.
    The server reads the file before /health answers 200 (cmd_serve.cpp), so
    it is removed as soon as the server is up, or failed to come up."""
    with tempfile.NamedTemporaryFile("w", prefix="m2cpp-replay-", suffix=".json", delete=False) as f:
        json.dump({"outputs": outputs}, f)
    try:
        return ServerProcess("--replay", f.name, *extra_args, **kwargs)
    finally:
        os.unlink(f.name)


def wait_for(predicate, timeout=30, interval=0.02):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()
