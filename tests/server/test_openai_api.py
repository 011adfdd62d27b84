"""The OpenAI API of `m2cpp serve` through the official `openai` SDK, on the
tiny random chat model: chat completions and completions, whole and
streamed, token-id prompts, logprobs, stop sequences, seeds, n, usage,
models, and vLLM's tokenize/detokenize."""
import httpx
import openai
import pytest

from live_server import MODEL_NAME

MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say something."}]


def test_models(openai_client):
    models = openai_client.models.list()
    assert [m.id for m in models.data] == [MODEL_NAME]
    card = models.data[0].model_dump()
    assert card["max_model_len"] == 2048
    assert openai_client.models.retrieve(MODEL_NAME).id == MODEL_NAME


def test_chat_non_streaming(openai_client):
    r = openai_client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, max_tokens=12, seed=1)
    assert r.object == "chat.completion"
    assert r.id.startswith("chatcmpl-")
    c = r.choices[0]
    assert c.message.role == "assistant"
    assert c.finish_reason in ("stop", "length")
    assert r.usage.completion_tokens <= 12
    assert r.usage.prompt_tokens > 10
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    # The generation prompt opens <think>: a random model's words are reasoning until it writes </think>.
    extra = c.message.model_extra or {}
    assert "reasoning_content" in extra


def test_chat_max_tokens_gives_length(openai_client):
    r = openai_client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, max_completion_tokens=5,
                                              seed=3, extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 5


def test_chat_seed_is_reproducible(openai_client):
    kw = dict(model=MODEL_NAME, messages=MESSAGES, max_tokens=16, seed=1234, temperature=1.0,
              extra_body={"ignore_eos": True})
    a = openai_client.chat.completions.create(**kw)
    b = openai_client.chat.completions.create(**kw)
    assert a.choices[0].message.model_extra["reasoning_content"] == b.choices[0].message.model_extra["reasoning_content"]
    c = openai_client.chat.completions.create(**{**kw, "seed": 99})
    assert c.usage.completion_tokens == 16


def test_chat_streaming_matches_non_streaming(openai_client):
    kw = dict(model=MODEL_NAME, messages=MESSAGES, max_tokens=24, seed=7, extra_body={"ignore_eos": True})
    whole = openai_client.chat.completions.create(**kw)
    stream = openai_client.chat.completions.create(**kw, stream=True, stream_options={"include_usage": True})
    reasoning, content, finish, usage, roles = "", "", None, None, []
    for chunk in stream:
        assert chunk.object == "chat.completion.chunk"
        if chunk.usage is not None:
            usage = chunk.usage
        for ch in chunk.choices:
            d = ch.delta
            if d.role:
                roles.append(d.role)
            reasoning += (d.model_extra or {}).get("reasoning_content") or ""
            content += d.content or ""
            if ch.finish_reason:
                finish = ch.finish_reason
    assert roles == ["assistant"]
    assert finish == whole.choices[0].finish_reason == "length"
    assert reasoning == (whole.choices[0].message.model_extra["reasoning_content"] or "")
    assert content == (whole.choices[0].message.content or "")
    assert usage.completion_tokens == 24 and usage.prompt_tokens == whole.usage.prompt_tokens


def test_chat_n_and_logprobs(openai_client):
    r = openai_client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, max_tokens=6, n=3, seed=5,
                                              logprobs=True, top_logprobs=2, extra_body={"ignore_eos": True})
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert r.usage.completion_tokens == 18
    for c in r.choices:
        lp = c.logprobs.content
        assert len(lp) == 6
        for e in lp:
            assert e.logprob <= 0
            assert len(e.top_logprobs) == 2
            assert e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob
            assert isinstance(e.bytes, list)


def test_chat_greedy_logprob_is_top(openai_client):
    r = openai_client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, max_tokens=4, temperature=0,
                                              logprobs=True, top_logprobs=1, extra_body={"ignore_eos": True})
    for e in r.choices[0].logprobs.content:
        assert abs(e.logprob - e.top_logprobs[0].logprob) < 1e-6


def test_chat_stop_sequence(openai_client):
    # Find a piece of text the seeded run produces, then stop on it.
    kw = dict(model=MODEL_NAME, messages=MESSAGES, max_tokens=40, seed=11, temperature=0,
              extra_body={"ignore_eos": True})
    full = openai_client.chat.completions.create(**kw).choices[0].message.model_extra["reasoning_content"]
    assert full and len(full) > 8
    stop = full[4:8]
    r = openai_client.chat.completions.create(**kw, stop=[stop])
    assert r.choices[0].finish_reason == "stop"
    got = r.choices[0].message.model_extra["reasoning_content"] or ""
    assert stop not in got
    assert full.startswith(got)
    assert r.choices[0].model_extra["stop_reason"] == stop


def test_completions_text_ids_and_lists(server, openai_client):
    r = openai_client.completions.create(model=MODEL_NAME, prompt="Hello there", max_tokens=5, temperature=0,
                                         extra_body={"ignore_eos": True})
    assert r.object == "text_completion"
    assert r.choices[0].finish_reason == "length"
    text_ids = httpx.post(server.url + "/tokenize", json={"prompt": "Hello there"}).json()["tokens"]
    r2 = openai_client.completions.create(model=MODEL_NAME, prompt=text_ids, max_tokens=5, temperature=0,
                                          extra_body={"ignore_eos": True})
    assert r2.choices[0].text == r.choices[0].text
    assert r2.usage.prompt_tokens == len(text_ids)
    r3 = openai_client.completions.create(model=MODEL_NAME, prompt=["Hello there", text_ids, "Other"], max_tokens=3,
                                          n=2, temperature=0, extra_body={"ignore_eos": True})
    assert [c.index for c in r3.choices] == list(range(6))
    assert r3.choices[0].text == r3.choices[2].text == r.choices[0].text[: len(r3.choices[0].text)]
    assert r3.usage.completion_tokens == 18


def test_completions_echo_and_logprobs(openai_client):
    r = openai_client.completions.create(model=MODEL_NAME, prompt="Echo me", max_tokens=4, echo=True, logprobs=3,
                                         temperature=0, extra_body={"ignore_eos": True})
    c = r.choices[0]
    assert c.text.startswith("Echo me")
    lp = c.logprobs
    n_prompt = r.usage.prompt_tokens
    assert len(lp.tokens) == n_prompt + 4
    assert lp.token_logprobs[0] is None
    assert all(x <= 0 for x in lp.token_logprobs[1:])
    # a dict by token text: tokens that decode alike (lone bytes -> U+FFFD) share a key
    assert all(1 <= len(t) <= 3 for t in lp.top_logprobs[n_prompt:])
    assert "".join(lp.tokens[:n_prompt]) == "Echo me"


def test_completions_tokens_as_ids(openai_client):
    r = openai_client.completions.create(model=MODEL_NAME, prompt="Hi", max_tokens=3, logprobs=1, temperature=0,
                                         extra_body={"ignore_eos": True, "return_tokens_as_token_ids": True})
    assert all(t.startswith("token_id:") for t in r.choices[0].logprobs.tokens)


def test_completions_streaming(openai_client):
    kw = dict(model=MODEL_NAME, prompt="Stream this", max_tokens=10, seed=2, extra_body={"ignore_eos": True})
    whole = openai_client.completions.create(**kw)
    text, finish, usage = "", None, None
    for chunk in openai_client.completions.create(**kw, stream=True, stream_options={"include_usage": True}):
        if chunk.usage:
            usage = chunk.usage
        for c in chunk.choices:
            text += c.text
            finish = c.finish_reason or finish
    assert text == whole.choices[0].text
    assert finish == "length"
    assert usage.completion_tokens == 10


def test_tokenize_detokenize(server):
    r = httpx.post(server.url + "/tokenize", json={"model": MODEL_NAME, "prompt": "Hello <think>x</think>",
                                                   "return_token_strs": True}).json()
    assert r["count"] == len(r["tokens"]) and r["max_model_len"] == 2048
    assert "<think>" in r["token_strs"]
    d = httpx.post(server.url + "/detokenize", json={"model": MODEL_NAME, "tokens": r["tokens"]}).json()
    assert d["prompt"] == "Hello <think>x</think>"
    chat = httpx.post(server.url + "/tokenize", json={"messages": MESSAGES}).json()
    assert chat["count"] > 10


def test_user_and_sampling_fields_accepted(openai_client):
    r = openai_client.chat.completions.create(
        model=MODEL_NAME, messages=MESSAGES, max_tokens=3, user="someone", top_p=0.9, presence_penalty=0.5,
        frequency_penalty=0.5, logit_bias={"100": 5}, seed=1,
        extra_body={"top_k": 10, "min_p": 0.01, "repetition_penalty": 1.1, "min_tokens": 2})
    assert r.usage.completion_tokens >= 2


def test_errors_are_openai_shaped(openai_client):
    with pytest.raises(openai.BadRequestError) as e:
        openai_client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "wizard", "content": "x"}])
    assert "wizard" in e.value.message
    assert e.value.body["type"] == "invalid_request_error"
    with pytest.raises(openai.NotFoundError):
        openai_client.chat.completions.create(model="no-such-model", messages=MESSAGES)
    with pytest.raises(openai.BadRequestError) as e:
        openai_client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, temperature="hot")
    assert "temperature" in e.value.message
    with pytest.raises(openai.BadRequestError) as e:
        openai_client.completions.create(model=MODEL_NAME, prompt="x " * 3000, max_tokens=4)
    assert "maximum context length is 2048 tokens" in e.value.message
