"""Differential test of the Jinja interpreter, construct by construct: each
snippet is rendered by `m2cpp template` (the snippet is the model's
chat_template.jinja; variables come in through chat_template_kwargs) and by
Python jinja2 set up like Hugging Face (tools/chat_template_ref.py). Output
must be byte-identical; where jinja2 raises, m2cpp must fail as well.
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

import chat_template_ref  # noqa: E402

pytestmark = pytest.mark.skipif(not BINARY or not os.path.exists(BINARY), reason="M2CPP_BINARY not built")

VARS = {
    "s": "Hello, World",
    "u": "héllo wörld 中文 🎉",
    "n": 7,
    "f": 2.5,
    "neg": -3,
    "t": True,
    "z": None,
    "l": [3, 1, 2],
    "words": ["b", "A", "c", "a"],
    "d": {"b": 1, "a": 2, "C": 3},
    "people": [{"name": "Ann", "age": 30, "tags": ["x"]}, {"name": "bob", "age": 25}, {"name": "Cid", "age": 30}],
    "nested": {"x": {"y": [10, {"z": "deep"}]}},
    "text": "  line one\n\tline two  \nline three\n",
    "empty": "",
    "el": [],
    "ed": {},
    "mixed": [1, "a", None, True, 1.5, {"k": "it's"}, ["q\"uote"]],
    "msgs": [
        {"role": "system", "content": " Sys prompt "},
        {"role": "user", "content": "Hi"},
        {
            "role": "assistant",
            "content": "<think>r</think>\n\nYo",
            "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1, "b": "x"}}}],
        },
        {"role": "tool", "content": "r1"},
        {"role": "user", "content": [{"type": "text", "text": "p1"}, {"type": "image"}, {"type": "text", "text": "p2"}]},
    ],
}

MESSAGES = [{"role": "user", "content": "x"}]

SNIPPETS = [
    # ---- printing values like Python's str()
    "{{ n }}|{{ f }}|{{ neg }}|{{ t }}|{{ z }}|{{ l }}|{{ d }}|{{ mixed }}",
    "{{ 1.0 }}|{{ 3.0 * 2 }}|{{ 1e16 }}|{{ 1e15 }}|{{ 0.0001 }}|{{ 0.00001 }}|{{ 0.1 + 0.2 }}|{{ 1 / 3 }}|{{ -0.0 }}",
    "{{ 1e308 * 10 }}|{{ -1e308 * 10 }}|{{ 123456789012345678.0 }}|{{ 2 ** 62 }}|{{ 1.5e-7 }}|{{ 5e-324 }}",
    "{{ ('a',) }}|{{ (1, 2) }}|{{ () }}|{{ [] }}|{{ {} }}|{{ [[]] }}|{{ {'a': [1, {'b': None}]} }}",
    "{{ ['it\\'s', \"say \\\"hi\\\"\", 'both \\' \"', 'back\\\\slash', 'tab\\there', 'nl\\n'] }}",
    "{{ ['\\u200b', '\\x85', '\\x7f', '\\x01', 'é', '中', '🎉', '\\u00a0', '\\u2028', '\\U0001F600'] }}",
    "{{ d.items() }}|{{ d.keys() }}|{{ d.values() }}|{{ range(3) }}|{{ range(1, 10, 3) }}",
    "{{ s }}{{ u }}{{ empty }}{{ undefined_var }}|{{ undefined_var is defined }}",
    "{{ namespace(a=1, b='x') }}",
    # ---- literals and string escapes
    "{{ 'a\\tb' }}|{{ \"q\\\"q\" }}|{{ 'x\\x41\\u0042\\U00000043' }}|{{ 'oct\\101' }}|{{ 'keep\\d' }}|{{ 'a' 'b' \"c\" }}",
    "{{ 0x1F }}|{{ 0o17 }}|{{ 0b101 }}|{{ 1_000_000 }}|{{ 1_0.5_0 }}|{{ 1e3 }}|{{ 1E-2 }}|{{ 1_000e-1_0 }}",
    "{{ true }}{{ True }}{{ false }}{{ none }}{{ None }}",
    "{{ [1, 2, ] }}|{{ {'a': 1, } }}|{{ (1, 2, ) }}",
    # ---- arithmetic
    "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 7 / 2 }} {{ 6 / 3 }}",
    "{{ 2 ** 10 }} {{ 2 ** -1 }} {{ 2 ** 3 ** 2 }} {{ 2.0 ** 0.5 }} {{ -2 ** 2 }} {{ (-2) ** 2 }}",
    "{{ 1 + 2 * 3 - 4 }} {{ (1 + 2) * 3 }} {{ 10 - 2 - 3 }} {{ 2 * 3 ~ 4 }} {{ 1 + 2 ~ 3 }}",
    "{{ 'ab' * 3 }} {{ 3 * 'x' }} {{ [1] * 3 }} {{ 'a' + 'b' }} {{ [1] + [2] }} {{ (1,) + (2,) }} {{ 'x' * 0 }} {{ 'x' * -1 }}",
    "{{ True + 1 }} {{ True * 2.5 }} {{ -True }} {{ +n }} {{ -f }} {{ n + f }} {{ n * f }}",
    "{{ 1 ~ 2 ~ 'x' ~ none ~ true ~ [1] }}|{{ undefined_var ~ 'x' }}",
    # ---- comparisons and logic
    "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ 1 == true }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ (1, 2) == [1, 2] }}",
    "{{ 1 != 2 }} {{ none == none }} {{ z is none }} {{ 'é' > 'z' }} {{ 'B' < 'a' }} {{ [1] == [1] }} {{ d == {'a': 2, 'b': 1, 'C': 3} }}",
    "{{ 'ell' in s }} {{ 'x' not in s }} {{ 2 in l }} {{ 'a' in d }} {{ 'z' in d }} {{ 'x' in undefined_var }} {{ none in [none] }}",
    "{{ 0 or 'x' }}|{{ 'a' and 'b' }}|{{ '' and 'b' }}|{{ not 0 }}|{{ not not 'x' }}|{{ none or [] or 0 }}|{{ l and l[0] }}",
    "{{ 'yes' if n > 5 else 'no' }}|{{ 'yes' if n > 50 }}|{{ ('a' if false) is defined }}|{{ 1 if 0 else 2 if 0 else 3 }}",
    # ---- tests
    "{{ s is string }} {{ n is string }} {{ d is mapping }} {{ l is mapping }} {{ l is iterable }} {{ n is iterable }} {{ s is iterable }}",
    "{{ l is sequence }} {{ d is sequence }} {{ s is sequence }} {{ undefined_var is sequence }} {{ undefined_var is iterable }} {{ z is iterable }}",
    "{{ n is number }} {{ f is number }} {{ t is number }} {{ n is integer }} {{ t is integer }} {{ f is float }} {{ n is float }}",
    "{{ t is boolean }} {{ n is boolean }} {{ t is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }} {{ z is none }}",
    "{{ n is odd }} {{ n is even }} {{ 10 is divisibleby 5 }} {{ 10 is divisibleby(3) }} {{ 2.0 is even }}",
    "{{ n is eq 7 }} {{ n is equalto 7 }} {{ n is ne 7 }} {{ n is gt 3 }} {{ n is lt 3 }} {{ n is ge 7 }} {{ n is le 6 }} {{ n is in l }} {{ 3 is in l }}",
    "{{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 'aBc' is lower }} {{ '123' is lower }} {{ undefined_var is undefined }} {{ z is not none }}",
    "{{ range is callable }} {{ s.upper is callable }} {{ n is callable }} {{ z is sameas none }} {{ t is sameas true }}",
    "{{ s is not string }} {{ not s is string }} {{ (s is string) and (n is number) }}",
    # ---- attribute / item access
    "{{ nested.x.y[1].z }}|{{ nested['x']['y'][0] }}|{{ people[0].name }}|{{ people[-1]['age'] }}|{{ l.1 }}|{{ nested.missing }}|{{ l[10] }}",
    "{{ d.items is defined }}|{{ (1.5).real }}{{ (2).imag }}{{ true.real }}|{{ d['items'] is defined }}|{{ s.nope }}|{{ none.attr }}|{{ (1).real }}|{{ d.get('a') }}|{{ d.get('q', 'dflt') }}|{{ d.get('q') }}",
    "{% set m = {'items': 1, 'values': 2, 'x': 3} %}{{ m['items'] }}|{{ m.x }}|{{ m.get('values') }}|{{ m['keys'] is defined }}",
    # ---- slicing
    "{{ s[1:4] }}|{{ s[-5:] }}|{{ s[::-1] }}|{{ s[::2] }}|{{ s[10:2:-2] }}|{{ s[:] }}|{{ s[100:] }}|{{ s[-100:3] }}",
    "{{ u[1:5] }}|{{ u[::-1] }}|{{ u[-3:] }}|{{ u[2] }}|{{ u[-1] }}|{{ u|length }}",
    "{{ l[1:] }}|{{ l[::-1] }}|{{ l[-2:] }}|{{ l[:-1] }}|{{ l[5:] }}|{{ (1, 2, 3)[1:] }}|{{ l[::2] }}|{{ l[1:2:0] is defined }}",
    # ---- string methods
    "{{ text.strip() }}|{{ text.lstrip() }}|{{ text.rstrip() }}|{{ 'xxhixx'.strip('x') }}|{{ '..a..'.lstrip('.') }}|{{ 'ab\\n\\n'.rstrip('\\n') }}",
    "{{ 'a,b,,c'.split(',') }}|{{ '  a  b  '.split() }}|{{ 'a b c d'.split(' ', 1) }}|{{ 'a b c d'.rsplit(' ', 1) }}|{{ 'a</t>b</t>c'.split('</t>')[-1] }}",
    "{{ text.splitlines() }}|{{ 'x'.split('x') }}|{{ ''.split() }}|{{ ''.split(',') }}|{{ '  a b '.split(None, 1) }}|{{ '  a b '.rsplit(None, 1) }}",
    "{{ s.startswith('Hell') }} {{ s.endswith('ld') }} {{ s.startswith(('x', 'H')) }} {{ s.upper() }} {{ s.lower() }} {{ u.upper() }} {{ s.title() }}",
    "{{ \"they're bill's\".title() }}|{{ 'hELLO wORLD'.capitalize() }}|{{ s.replace('l', 'L') }}|{{ s.replace('l', 'L', 2) }}|{{ 'abc'.replace('', '-') }}",
    "{{ s.find('o') }} {{ s.rfind('o') }} {{ s.find('zz') }} {{ u.find('中') }} {{ s.count('l') }} {{ s.index('W') }} {{ '-'.join(['a', 'b']) }}",
    "{{ 'abc'.isalpha() }} {{ '123'.isdigit() }} {{ 'a1'.isalnum() }} {{ ' \\t'.isspace() }} {{ 'abc'.islower() }} {{ 'ABC'.isupper() }}",
    "{{ 'pre_x'.removeprefix('pre_') }} {{ 'x.txt'.removesuffix('.txt') }} {{ '{} and {}'.format('a', 1) }} {{ '{1}{0}'.format('a', 'b') }} {{ '{x}!'.format(x=5) }}",
    # ---- filters
    "{{ l|sort }}|{{ l|sort(reverse=true) }}|{{ words|sort }}|{{ words|sort(case_sensitive=true) }}|{{ people|sort(attribute='age')|map(attribute='name')|join(',') }}",
    "{{ people|sort(attribute='age,name')|map(attribute='name')|list }}|{{ people|sort(attribute='name', reverse=true)|map(attribute='name')|list }}",
    "{{ d|dictsort }}|{{ d|dictsort(true) }}|{{ d|dictsort(by='value') }}|{{ d|dictsort(reverse=true) }}|{{ d|items|list }}",
    "{{ words|unique|list }}|{{ words|unique(case_sensitive=true)|list }}|{{ [1, 2, 1, 1.0, true]|unique|list }}|{{ people|unique(attribute='age')|map(attribute='name')|list }}",
    "{{ l|first }}|{{ l|last }}|{{ el|first }}|{{ s|first }}|{{ s|last }}|{{ d|first }}|{{ l|min }}|{{ l|max }}|{{ words|min }}|{{ words|max(case_sensitive=true) }}",
    "{{ l|join }}|{{ l|join(', ') }}|{{ people|join(';', attribute='name') }}|{{ mixed|join('|') }}|{{ s|join('.') }}",
    "{{ l|length }}|{{ s|count }}|{{ d|length }}|{{ u|length }}|{{ undefined_var|length }}|{{ l|sum }}|{{ people|sum(attribute='age') }}|{{ [0.5, 1]|sum(start=10) }}",
    "{{ s|upper }}|{{ s|lower }}|{{ 'hello wORLD-x(y[z<w'|title }}|{{ 'hELLO'|capitalize }}|{{ s|replace('o', '0') }}|{{ s|reverse }}|{{ l|reverse|list }}",
    "{{ '  x  '|trim }}|{{ '--x--'|trim('-') }}|{{ n|string ~ 'x' }}|{{ l|string }}|{{ z|string }}|{{ undefined_var|string }}|{{ s|safe }}",
    "{{ x|default('dflt') }}|{{ ''|default('dflt') }}|{{ ''|default('dflt', true) }}|{{ z|default('dflt') }}|{{ x|d('short') }}|{{ 0|d(5, boolean=true) }}",
    "{{ '42'|int }} {{ '3.9'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ '0x1A'|int(base=16) }} {{ '1A'|int(0, 16) }} {{ ' 12 '|int }} {{ 4.99|int }} {{ -4.99|int }} {{ '1_000'|int }}",
    "{{ '2.5'|float }} {{ 'x'|float }} {{ n|float }} {{ ' 1e3 '|float }} {{ 'inf'|float }} {{ '-nan'|float }} {{ 't'|float(1.5) }}",
    "{{ -3|abs }} {{ -2.5|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 2.5|round(0, 'floor') }} {{ 2.1|round(0, 'ceil') }} {{ 7|round }} {{ 1234.5678|round(-2) }}",
    "{{ l|map('string')|join('-') }}|{{ people|map(attribute='name')|map('upper')|list }}|{{ people|map(attribute='tags', default=['none'])|list }}|{{ people|map(attribute='tags.0')|list }}",
    "{{ l|select('odd')|list }}|{{ l|reject('odd')|list }}|{{ [0, 1, '', 'a', none]|select|list }}|{{ l|select('gt', 1)|list }}|{{ l|select('in', [1, 2])|list }}",
    "{{ people|selectattr('age', 'equalto', 30)|map(attribute='name')|list }}|{{ people|rejectattr('tags')|map(attribute='name')|list }}|{{ people|selectattr('tags', 'defined')|list|length }}",
    "{{ l|batch(2)|list }}|{{ l|batch(2, 'x')|list }}|{{ 'one two  three'|wordcount }}|{{ 'a-b_c d'|wordcount }}|{{ 'x'|center(5) }}|{{ 'ab'|center(5) }}",
    "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent('> ', blank=true) }}|{{ '<a href=\"x\">&\\'</a>'|e }}|{{ 5|escape }}",
    "{{ d|tojson }}|{{ mixed|tojson }}|{{ u|tojson }}|{{ u|tojson(ensure_ascii=true) }}|{{ d|tojson(sort_keys=true) }}|{{ 'a\\u2028\\x7f\\x1f'|tojson }}",
    "{{ nested|tojson(indent=2) }}|{{ nested|tojson(indent='\\t') }}|{{ [el, ed]|tojson(indent=1) }}|{{ d|tojson(separators=(',', ':')) }}|{{ 1.0|tojson }}|{{ [1e16, -0.0, 1e-7]|tojson }}",
    "{{ l|list }}|{{ s|list }}|{{ d|list }}|{{ (1, 2)|list }}|{{ el|list }}|{{ undefined_var|list }}",
    "{{ people[0]|attr('name') }}|{{ people[0]|attr('items') is defined }}|{{ (l|select('odd'))|first }}",
    "{{ s|upper|lower|title|replace(' ', '_')|length }}|{{ -l|length if false else -(l|length) }}",
    # ---- generators behave like Python generators
    "{% set g = l|select('odd') %}{% for x in g %}{{ x }}{% endfor %}|{% for x in g %}{{ x }}{% endfor %}|{{ 'truthy' if el|select else 'falsy' }}",
    # ---- for loops
    "{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
    "{% for x in l %}{{ loop.previtem }}>{{ x }}>{{ loop.nextitem }}|{{ loop.previtem is defined }};{% endfor %}",
    "{% for x in l %}{{ loop.cycle('odd', 'even') }}{{ loop.changed(x > 1) }}{{ loop.depth }}{{ loop.depth0 }} {% endfor %}",
    "{% for x in el %}{{ x }}{% else %}empty{% endfor %}|{% for x in l %}{{ x }}{% else %}never{% endfor %}",
    "{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}|{% for k in d %}{{ k }}{% endfor %}|{% for c in 'héllo' %}[{{ c }}]{% endfor %}",
    "{% for a, b in [(1, 2), [3, 4], 'xy'] %}{{ a }}{{ b }}{% endfor %}|{% for (a, b), c in [((1, 2), 3)] %}{{ a }}{{ b }}{{ c }}{% endfor %}",
    "{% for x in l if x > 1 %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% endfor %}|{% for p in people if p.age > 26 %}{{ p.name }}{% endfor %}",
    "{% for x in range(10) %}{% if x is even %}{% continue %}{% endif %}{% if x > 7 %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "{% for x in [1, 2] %}{% for y in 'ab' %}{{ x }}{{ y }}{{ loop.index }}{% endfor %}{{ loop.index }} {% endfor %}",
    "{% for x in [1, 2] %}{% set outer = loop %}{% for y in [3] %}{{ outer.index }}{{ loop.index }}{% endfor %}{% endfor %}",
    "{% for x in l|sort %}{{ x }}{% endfor %}|{% for i in range(3, 0, -1) %}{{ i }}{% endfor %}|{% for i in range(0) %}x{% endfor %}",
    "{% for x in undefined_var %}{{ x }}{% else %}undefined is empty{% endfor %}",
    # ---- scoping
    "{% set a = 1 %}{% for x in l %}{% set a = x %}{{ a }}{% endfor %}|{{ a }}",
    "{% for x in l %}{% if loop.first %}{% set y = 5 %}{% endif %}[{{ y }}]{% endfor %}",
    "{% if true %}{% set q = 3 %}{% endif %}{{ q }}|{% with w = 4 %}{% set v = 5 %}{{ w }}{{ v }}{% endwith %}{{ w }}{{ v }}",
    "{% set ns = namespace(total=0, items=[]) %}{% for x in l %}{% set ns.total = ns.total + x %}{% set ns.items = ns.items + [x * 2] %}{% endfor %}{{ ns.total }}{{ ns.items }}",
    "{% set ns = namespace(d) %}{{ ns.a }}{{ ns.b }}|{% set ns2 = namespace(ns=1, other='x') %}{{ ns2.other }}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set c, (e, g) = 'x', [1, 2] %}{{ c }}{{ e }}{{ g }}|{% set t1 = 1, 2 %}{{ t1 }}",
    "{% set x %}block {{ n }}{% endset %}[{{ x }}]|{% set y | upper | replace('B', 'b') %}block{% endset %}[{{ y }}]",
    "{% filter upper %}hello {{ s }}{% endfilter %}|{% filter replace('a', 'A')|title %}banana split{% endfilter %}",
    # ---- macros
    "{% macro greet(name, greeting='Hi', punct='!') %}{{ greeting }} {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }}|{{ greet('Bo', 'Yo') }}|{{ greet(punct='?', name='Cy') }}",
    "{% macro m(a, b=a * 2) %}{{ a }},{{ b }}{% endmacro %}{{ m(1) }}|{{ m(1, 5) }}|{{ m(b=0, a=3) }}|[{{ m() }}]",
    "{% macro m() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, x=3) }}",
    "{% macro fact(k) %}{% if k <= 1 %}1{% else %}{{ k * fact(k - 1)|int }}{% endif %}{% endmacro %}{{ fact(6) }}",
    "{% macro outer_v() %}{{ v }}{% endmacro %}{% set v = 'late' %}{{ outer_v() }}|{% for v in ['loop'] %}{{ outer_v() }}{% endfor %}",
    "{% for x in l %}{% macro show() %}<{{ x }}>{% endmacro %}{{ show() }}{% endfor %}",
    "{% macro m(content) %}{%- if content is string -%}S:{{ content }}{%- elif content is iterable -%}{%- for c in content -%}{{ c.text }}{%- endfor -%}{%- endif -%}{% endmacro %}[{{ m('x') }}][{{ m([{'text': 'a'}, {'text': 'b'}]) }}][{{ m(none) }}]",
    "{% macro m() %}{% set inner = 1 %}{{ inner }}{% endmacro %}{{ m() }}{{ inner is defined }}|{% set r = m() %}{{ r ~ r }}|{{ m() is string }}",
    # ---- globals
    "{{ range(5)|list }}|{{ range(2, 5)|list }}|{{ range(10, 0, -3)|list }}|{{ range(5)|length }}|{{ range(3)[1] }}",
    "{{ dict(a=1, b=2) }}|{{ dict([('x', 1), ['y', 2]]) }}|{{ dict({'k': 1}, z=0) }}|{{ dict() }}",
    # ---- whitespace control, trim_blocks, lstrip_blocks
    "a\n{% if true %}\nb\n{% endif %}\nc\n",
    "a\n    {% if true %}\n    b\n    {% endif %}\n    c",
    "a  {% if true %}  b  {% endif %}  c",
    "a\n  {%- if true -%}\n  b\n  {%- endif -%}\n  c",
    "a\n  {%+ if true +%}\n  b\n  {% endif %}\n  c",
    "x  {{ 'v' }}  \n  {{- 'w' -}}  \n  y",
    "a\n  {# comment #}\nb\n  {#- trimmed -#}  \nc{# {% not a tag %} #}d",
    "{% raw %}{{ not rendered }} {% if %}{% endraw %}|{%- raw -%}  spaced  {%- endraw -%}  |",
    "  {% raw %}\n  x\n  {% endraw %}\n  y",
    "line\r\nwindows\r\n{% if true %}\r\nin\r\n{% endif %}\r\nend\r\n",
    "trailing newline\n",
    "two trailing\n\n",
    "{% for x in l %}\n  {{ x }}\n{% endfor %}\n",
    "{% for x in l -%}\n  {{ x }}\n{%- endfor %}",
    "{%- set a = 1 -%}\n\n   {{ a }}   \n\n{%- set b = 2 %}\n{{ b }}",
    "\t{% if true %}tab-indented{% endif %}\n\u3000{% if true %}ideographic{% endif %}",
    "{{ 'a' }}\n{% if false %}x{% endif %}\n{{ 'b' }}",
    "{% if true %}{{- '  padded  ' -}}{% endif %}|",
    # ---- {% generation %} (transformers' extension)
    "{% generation %}assistant text {{ n }}{% endgeneration %}|",
    # ---- patterns common in Hugging Face chat templates
    "{%- if msgs[0]['role'] == 'system' %}{%- set sys = msgs[0]['content']|trim %}{%- set msgs = msgs[1:] %}{% else %}{% set sys = '' %}{%- endif %}[{{ sys }}]{{ msgs|length }}{{ msgs[0].role }}",
    "{% for m in msgs %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 1) %}{{ loop.index0 }}!{% endif %}{% endfor %}",
    "{% for m in msgs if m.content is not string %}{{ m.content|selectattr('type', 'equalto', 'text')|map(attribute='text')|join('\\n') }}{% endfor %}",
    "{% for m in msgs %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content']|string|trim + '<|im_end|>' }}{% endfor %}",
    "{% for m in msgs %}{%- if m.tool_calls is defined and m.tool_calls|length > 0 %}{% for tc in m.tool_calls %}{% set tc = tc.function if tc.function is defined else tc %}{{ tc.name }}{{ tc.arguments|tojson }}{{ tc.arguments|tojson(indent=4) }}{% endfor %}{% endif %}{% endfor %}",
    "{% set ns = namespace(found=false, last=-1) %}{% for m in msgs %}{% if m.role == 'system' %}{% set ns.found = true %}{% endif %}{% if m.role == 'user' %}{% set ns.last = loop.index0 %}{% endif %}{% endfor %}{{ ns.found }}{{ ns.last }}",
    "{% for m in msgs %}{% if m.content is string and '</think>' in m.content %}{{ m.content.split('</think>')[-1].lstrip('\\n') }}|{{ m.content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}{% endif %}{% endfor %}",
    "{{ msgs|length }}{{ msgs[-1]['role'] }}{{ msgs|map(attribute='role')|unique|list }}{{ msgs|selectattr('tool_calls', 'defined')|list|length }}",
    "{% for m in msgs %}{{ '[INST] ' + m['content'] + ' [/INST]' if m.role == 'user' and m.content is string else '' }}{% endfor %}",
    "{% for m in msgs[::-1] %}{% set index = (msgs|length - 1) - loop.index0 %}{{ index }}{% endfor %}",
    "{{ msgs[2]|tojson }}|{{ msgs[4]['content'][1] }}|{{ msgs[4].content[1].text is defined }}",
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{{ add_generation_prompt }}{{ tools is none }}{{ documents is defined }}{{ messages|length }}",
    "{{ '\\n\\n'.join(msgs|map(attribute='role')) }}|{{ ', '.join(['a', 'b']) }}",
    # ---- errors: both must fail
    "{{ undefined_var.attr }}",
    "{{ undefined_var['x'] }}",
    "{{ undefined_var() }}",
    "{{ undefined_var + 1 }}",
    "{{ d.missing.deeper }}",
    "{{ raise_exception('custom failure message') }}",
    "{% set x = [1] %}{{ x.append(2) }}",
    "{{ d.update({'a': 1}) }}",
    "{{ 'a' + 1 }}",
    "{{ 1 + 'a' }}",
    "{{ [1] + (2,) }}",
    "{{ 1 / 0 }}",
    "{{ 1 // 0 }}",
    "{{ 'x' < 1 }}",
    "{{ d < d }}",
    "{{ range(100001)|length }}",
    "{{ namespace(_hidden=1) }}",
    "{% set ns = namespace() %}{% set ns._x = 1 %}",
    "{% set notns = {} %}{% set notns.a = 1 %}",
    "{{ l|nosuchfilter }}",
    "{{ n is nosuchtest }}",
    "{% if false %}{{ l|nosuchfilter }}{% endif %}ok-soft",
    "{{ l|nosuchfilter if false else 'ok-soft-cond' }}",
    "{% for x in l %}{{ x|nosuchfilter }}{% endfor %}",
    "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}",
    "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(b=1) }}",
    "{% for a, b in [1, 2] %}{% endfor %}",
    "{% set a, b = [1, 2, 3] %}",
    "{% if %}{% endif %}",
    "{% for x in l %}",
    "{% endfor %}",
    "{% if true %}{% endfor %}",
    "{{ 'unterminated }}",
    "{{ .5 }}",
    "{{ (1, 2 }}",
    "{{ 1 + }}",
    "{% do l %}",
    "{% break %}",
    "{{ 'x'|int(base=1) }}",
    "{{ l|join(1) ~ l[1.5] }}",
    "{{ none() }}",
    "{{ 5() }}",
    "{{ s.split('') }}",
    "{{ l.index(99) }}",
    "{{ {}|first.x }}",
    "{{ undefined_var|tojson }}",
    "{{ (l|select('odd'))|length }}",
    "{{ [1, 'a']|sort }}",
    "{{ [{'a': 1}]|unique|list }}",
    "{{ 'abc'[1.0] }}",
]


def jinja_render(source):
    try:
        # What `m2cpp template` passes besides chat_template_kwargs.
        return chat_template_ref.render(source, MESSAGES, tools=None, add_generation_prompt=True, **VARS), None
    except Exception as e:
        return None, f"{type(e).__name__}: {e}"


def m2cpp_render(source, workdir, index):
    model_dir = os.path.join(workdir, f"m{index}")
    os.makedirs(model_dir)
    with open(os.path.join(model_dir, "chat_template.jinja"), "w", encoding="utf-8", newline="") as f:
        f.write(source)
    request = {"messages": MESSAGES, "chat_template_kwargs": VARS}
    req_path = os.path.join(model_dir, "request.json")
    with open(req_path, "w", encoding="utf-8") as f:
        json.dump(request, f)
    proc = subprocess.run([BINARY, "template", "-m", model_dir, "--request", req_path], capture_output=True, timeout=60)
    return proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8", "replace")


def test_snippets_match_jinja2():
    with tempfile.TemporaryDirectory() as workdir, concurrent.futures.ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda i: m2cpp_render(SNIPPETS[i], workdir, i), range(len(SNIPPETS))))
    failures = []
    errors_expected = 0
    for source, (rc, out, err) in zip(SNIPPETS, got):
        want, want_error = jinja_render(source)
        if want_error is None:
            if rc != 0 or out != want:
                failures.append(f"{source!r}\n   jinja2: {want!r}\n   m2cpp:  {out if rc == 0 else 'ERROR ' + err!r}")
        else:
            errors_expected += 1
            if rc == 0:
                failures.append(f"{source!r}\n   jinja2 raised {want_error}\n   m2cpp rendered {out!r}")
            elif "line " not in err:
                failures.append(f"{source!r}\n   m2cpp error does not name a line: {err!r}")
    assert not failures, f"{len(failures)}/{len(SNIPPETS)} snippets differ:\n" + "\n".join(failures)
    assert errors_expected > 30
    print(f"{len(SNIPPETS)} snippets identical ({errors_expected} refused by both)")
