"""Thinking control through both SDKs: chat_template_kwargs.enable_thinking,
reasoning_effort and thinking_token_budget (OpenAI), `thinking` disabled /
enabled with budget_tokens (Anthropic), usage reasoning_tokens. The budget is
checked deterministically with `--replay`: the replayed reasoning never
closes, so the `</think>` in the answer is the one the budget forced."""

import anthropic
import httpx
import openai
import pytest

from live_server import MODEL_NAME, replay_server

LONG_REASONING = "Thinking at length about every part of the question[e~["
OUTPUTS = [
    {"match": "BUDGETTEST", "output": LONG_REASONING},
    {"match": "REASONTEST", "output": "Thinking about it.\nStep two.</think>\n\nThe answer is 42.[e~["},
]


@pytest.fixture(scope="module")
def server():
    s = replay_server(OUTPUTS)
    yield s
    assert s.stop() == 0


def user(text):
    return [{"role": "user", "content": text}]


def token_texts(server, text):
    """The text of each token of `text`, as the server's tokenizer splits it."""
    ids = httpx.post(server.url + "/tokenize", json={"prompt": text, "add_special_tokens": False}).json()["tokens"]
    return [httpx.post(server.url + "/detokenize", json={"tokens": [i]}).json()["prompt"] for i in ids]


def prompt_text(server, body):
    ids = httpx.post(server.url + "/tokenize", json=body).json()["tokens"]
    return httpx.post(server.url + "/detokenize", json={"tokens": ids}).json()["prompt"]


# ---- OpenAI ------------------------------------------------------------------------------------------------

def test_reasoning_tokens_in_usage(server, openai_client):
    r = openai_client.chat.completions.create(model=MODEL_NAME, messages=user("REASONTEST"), max_tokens=100)
    expected = len(token_texts(server, "Thinking about it.\nStep two."))
    assert r.usage.completion_tokens_details.reasoning_tokens == expected
    assert r.usage.completion_tokens > expected
    stream = openai_client.chat.completions.create(model=MODEL_NAME, messages=user("REASONTEST"), max_tokens=100,
                                                   stream=True, stream_options={"include_usage": True})
    usage = [c.usage for c in stream if c.usage][-1]
    assert usage.completion_tokens_details.reasoning_tokens == expected


def test_thinking_token_budget_forces_the_end_of_reasoning(server, openai_client):
    pieces = token_texts(server, LONG_REASONING[:-len("[e~[")])
    for stream in (False, True):
        kw = dict(model=MODEL_NAME, messages=user("BUDGETTEST"), max_tokens=100,
                  extra_body={"thinking_token_budget": 3})
        if stream:
            chunks = list(openai_client.chat.completions.create(**kw, stream=True,
                                                                stream_options={"include_usage": True}))
            reasoning = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
                                for c in chunks if c.choices)
            content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            usage = chunks[-1].usage
        else:
            r = openai_client.chat.completions.create(**kw)
            reasoning, content, usage = r.choices[0].message.model_extra["reasoning_content"], \
                r.choices[0].message.content, r.usage
        assert reasoning == "".join(pieces[:3])
        assert content == "".join(pieces[3:]).lstrip("\n")  # the replay goes on as the answer
        assert usage.completion_tokens_details.reasoning_tokens == 3
        assert usage.completion_tokens == len(pieces) + 2  # + the forced `</think>` + EOS


def test_budget_on_the_model_itself(openai_client):
    r = openai_client.chat.completions.create(model=MODEL_NAME, messages=user("Think."), max_tokens=12,
                                              temperature=0, extra_body={"thinking_token_budget": 4})
    assert r.usage.completion_tokens_details.reasoning_tokens <= 4
    assert r.usage.completion_tokens <= 12


def test_thinking_off(server, openai_client):
    closed = "]~b]ai\n<think>\n</think>\n\n"
    assert prompt_text(server, {"messages": user("hi"), "chat_template_kwargs": {"enable_thinking": False}}) \
        .endswith(closed)
    for extra in ({"chat_template_kwargs": {"enable_thinking": False}}, {"reasoning_effort": "none"}):
        r = openai_client.chat.completions.create(model=MODEL_NAME, messages=user("hi"), max_tokens=8,
                                                  extra_body=extra)
        assert r.choices[0].message.model_extra["reasoning_content"] is None
        assert r.usage.completion_tokens_details.reasoning_tokens == 0
    plain = openai_client.chat.completions.create(model=MODEL_NAME, messages=user("hi"), max_tokens=1)
    off = openai_client.chat.completions.create(model=MODEL_NAME, messages=user("hi"), max_tokens=1,
                                                reasoning_effort="none")
    assert off.usage.prompt_tokens > plain.usage.prompt_tokens  # the closed reasoning is in the prompt


def test_reasoning_effort_levels(openai_client):
    for effort in ("minimal", "low", "medium", "high", "xhigh", "max"):
        r = openai_client.chat.completions.create(model=MODEL_NAME, messages=user("BUDGETTEST"), max_tokens=20,
                                                  reasoning_effort=effort)
        assert r.choices[0].message.model_extra["reasoning_content"]  # budgets beyond 20 tokens: all reasoning
    with pytest.raises(openai.BadRequestError) as e:
        openai_client.chat.completions.create(model=MODEL_NAME, messages=user("x"), max_tokens=5,
                                              extra_body={"reasoning_effort": "extreme"})
    assert "reasoning_effort" in e.value.message


# ---- Anthropic ---------------------------------------------------------------------------------------------

def test_anthropic_thinking_disabled(anthropic_client):
    m = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=10, messages=user("REASONTEST"),
                                         thinking={"type": "disabled"})
    assert [b.type for b in m.content] == ["text"]  # the replay is all answer: no thinking block
    assert m.content[0].text.startswith("Thinking about it.")
    with anthropic_client.messages.stream(model=MODEL_NAME, max_tokens=10, messages=user("hi"),
                                          thinking={"type": "disabled"}) as stream:
        final = stream.get_final_message()
    assert all(b.type == "text" for b in final.content)


def test_anthropic_budget_tokens(server, anthropic_client):
    pieces = token_texts(server, LONG_REASONING[:-len("[e~[")])
    kw = dict(model=MODEL_NAME, max_tokens=100, messages=user("BUDGETTEST"),
              thinking={"type": "enabled", "budget_tokens": 3})
    m = anthropic_client.messages.create(**kw)
    assert [b.type for b in m.content] == ["thinking", "text"]
    assert m.content[0].thinking == "".join(pieces[:3])
    assert m.content[1].text == "".join(pieces[3:]).lstrip("\n")
    with anthropic_client.messages.stream(**kw) as stream:
        final = stream.get_final_message()
    assert [b.model_dump()["thinking" if b.type == "thinking" else "text"] for b in final.content] == \
        [m.content[0].thinking, m.content[1].text]
    adaptive = anthropic_client.messages.create(model=MODEL_NAME, max_tokens=100, messages=user("REASONTEST"),
                                                thinking={"type": "adaptive"})
    assert adaptive.content[0].thinking == "Thinking about it.\nStep two."
    for bad in ({"type": "enabled"}, {"type": "enabled", "budget_tokens": 5, "display": "omitted"},
                {"type": "between_tools"}):
        with pytest.raises(anthropic.BadRequestError) as e:
            anthropic_client.messages.create(model=MODEL_NAME, max_tokens=10, messages=user("x"), thinking=bad)
        assert "thinking" in e.value.message
