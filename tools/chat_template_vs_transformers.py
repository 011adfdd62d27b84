"""One-off check (needs `transformers`, which CI does not install): the jinja2
reference of tools/chat_template_ref.py renders exactly what transformers'
apply_chat_template(tokenize=False) renders, over the differential corpus.

    python3 tools/chat_template_vs_transformers.py [N]

Tokenizer directories come from ../shared/data/tokenizers (they hold the
tokenizer.json that transformers needs); the kitchen-sink template of
tests/data is passed to transformers through `chat_template=`.
"""

import os
import sys

from transformers import AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import chat_corpus  # noqa: E402
import chat_template_ref as ref  # noqa: E402

SHARED = os.path.join(ROOT, "..", "shared", "data", "tokenizers")
FIXTURES = os.path.join(ROOT, "tests", "data", "chat_templates")
# (fixture with the template, tokenizer directory for transformers)
PAIRS = [
    ("minimax-m2", "m2-layout"),
    ("qwen3", "qwen3"),
    ("deepseek-v3", "deepseek-v3"),
    ("kitchen-sink", "m2-layout"),
]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 600
    requests = chat_corpus.conversations(n)
    total_same = total = 0
    for fixture, tok_dir in PAIRS:
        model_dir = os.path.join(FIXTURES, fixture)
        tok = AutoTokenizer.from_pretrained(os.path.join(SHARED, tok_dir))
        same = errors_same = 0
        for i, request in enumerate(requests):
            source, _ = ref.load_model_dir(model_dir, with_tools=request.get("tools") is not None)
            messages = ref.normalize_messages(
                [dict(m) for m in ref.json.loads(ref.json.dumps(request["messages"]))],
                ref.handles_content_parts(source),
            )
            try:
                want = ref.render_request(model_dir, request)
            except Exception as e:
                want = f"error: {e}"
            try:
                got = tok.apply_chat_template(
                    messages,
                    tools=request.get("tools"),
                    chat_template=source,
                    tokenize=False,
                    add_generation_prompt=request.get("add_generation_prompt", True),
                )
            except Exception as e:
                got = f"error: {e}"
            if got == want:
                same += 1
                errors_same += want.startswith("error: ")
            elif total - total_same < 3:
                print(f"{fixture} #{i} differs:\n  ref {want!r}\n  hf  {got!r}")
            total += 1
        total_same += same
        print(f"{fixture}: {same}/{len(requests)} identical ({errors_same} identical errors)")
    print(f"all: {total_same}/{total} identical")
    return 0 if total_same == total else 1


if __name__ == "__main__":
    sys.exit(main())
