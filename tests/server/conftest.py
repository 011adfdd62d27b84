"""Fixtures of the server tests: a live `m2cpp serve` (tests/live_server.py)
shared by a test module, and the official OpenAI and Anthropic SDK clients
pointed at it."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from live_server import ServerProcess  # noqa: E402 (after the path it is found on)


@pytest.fixture(scope="module")
def server():
    s = ServerProcess()
    yield s
    assert s.stop() == 0, s.log_text()[-4000:]


@pytest.fixture(scope="module")
def openai_client(server):
    import openai
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def anthropic_client(server):
    import anthropic
    return anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0, timeout=60)
