"""Reference chat-template renderer: Python jinja2 set up the way Hugging Face
transformers renders chat templates (transformers/utils/chat_template_utils.py),
so it can run where transformers is not installed (CI has only jinja2).

Environment: ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
with the loopcontrols extension and transformers' {% generation %} tag;
`tojson` is json.dumps(x, ensure_ascii=False, indent=None, separators=None,
sort_keys=False); globals raise_exception, strftime_now, dict, and a namespace
that refuses underscore-prefixed attributes.

Also holds the reference for m2cpp's OpenAI-request normalisation
(src/text/chat_request.h states the rules), written independently here.

Usage as a tool:
    python3 tools/chat_template_ref.py MODEL_DIR REQUEST.json   # prints the prompt
"""

import functools
import json
import os
import sys
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


class _GenerationTag(jinja2.ext.Extension):
    """transformers' AssistantTracker without the tracking: renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


class _Namespace(jinja2.utils.Namespace):
    def __init__(*args, **kwargs):  # same signature trick as jinja2's Namespace
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _Namespace._check(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        _Namespace._check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                "Chat templates cannot store underscore-prefixed attributes on a namespace, but got "
                f"{name!r}. Please rename the attribute."
            )


class _Dict:
    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt):
    return datetime.now().strftime(fmt)


def hf_environment():
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTag, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _Dict()
    env.globals["namespace"] = _Namespace
    return env


_ENV = hf_environment()


@functools.lru_cache(maxsize=64)
def compile_template(source):
    return _ENV.from_string(source)


def render(source, messages, tools=None, add_generation_prompt=True, documents=None, **variables):
    """Renders like transformers' render_jinja_template for one conversation."""
    return compile_template(source).render(
        messages=messages, tools=tools, documents=documents, add_generation_prompt=add_generation_prompt, **variables
    )


# ---- model directory ------------------------------------------------------------

_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def _token_text(v):
    if isinstance(v, str):
        return v
    if isinstance(v, dict) and isinstance(v.get("content"), str):
        return v["content"]
    return None


def load_model_dir(model_dir, with_tools=False):
    """(template source, special-token variables) as transformers picks them."""
    config = {}
    config_path = os.path.join(model_dir, "tokenizer_config.json")
    if os.path.exists(config_path):
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    variables = {}
    for key in _SPECIAL_KEYS:
        text = _token_text(config.get(key))
        if text is not None:
            variables[key] = text
    if isinstance(config.get("additional_special_tokens"), list):
        variables["additional_special_tokens"] = [
            t for t in map(_token_text, config["additional_special_tokens"]) if t is not None
        ]
    jinja_path = os.path.join(model_dir, "chat_template.jinja")
    if os.path.exists(jinja_path):
        with open(jinja_path, encoding="utf-8", newline="") as f:
            return f.read(), variables
    tpl = config["chat_template"]
    if isinstance(tpl, list):
        named = {t["name"]: t["template"] for t in tpl}
        tpl = named["tool_use"] if with_tools and "tool_use" in named else named["default"]
    return tpl, variables


@functools.lru_cache(maxsize=64)
def handles_content_parts(source):
    """True when some {% for %} iterates `x.content` or `x['content']` (checked on jinja2's own AST)."""
    ast = _ENV.parse(source)
    for node in ast.find_all(jinja2.nodes.For):
        it = node.iter
        if isinstance(it, jinja2.nodes.Getattr) and it.attr == "content":
            return True
        if isinstance(it, jinja2.nodes.Getitem) and isinstance(it.arg, jinja2.nodes.Const) and it.arg.value == "content":
            return True
    return False


# ---- OpenAI request -> template inputs -----------------------------------------------


def normalize_messages(messages, keep_parts):
    out = []
    for m in messages:
        msg = {}
        for key, value in m.items():
            if key == "content":
                if value is None:
                    msg[key] = ""
                elif isinstance(value, list):
                    msg[key] = value if keep_parts else "\n".join(p["text"] for p in value)
                else:
                    msg[key] = value
            elif value is not None:
                msg[key] = value
        for call in msg.get("tool_calls") or []:
            fn = call["function"]
            args = fn.get("arguments")
            if args is None or args == "":
                fn["arguments"] = {}
            elif isinstance(args, str):
                fn["arguments"] = json.loads(args)
        if "reasoning_content" not in msg and isinstance(msg.get("reasoning"), str):
            msg["reasoning_content"] = msg["reasoning"]
        out.append(msg)
    return out


def render_request(model_dir, request):
    """What `m2cpp template -m MODEL_DIR --request REQUEST` must print."""
    request = json.loads(json.dumps(request))  # private deep copy
    tools = request.get("tools")
    source, variables = load_model_dir(model_dir, with_tools=tools is not None)
    messages = normalize_messages(request["messages"], handles_content_parts(source))
    variables.update(request.get("chat_template_kwargs") or {})
    return render(
        source,
        messages,
        tools=tools,
        add_generation_prompt=request.get("add_generation_prompt", True),
        documents=request.get("documents"),
        **variables,
    )


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: chat_template_ref.py MODEL_DIR REQUEST.json")
    with open(sys.argv[2], encoding="utf-8") as f:
        req = json.load(f)
    sys.stdout.write(render_request(sys.argv[1], req))
