"""Synthetic chat conversations in the MiniMax-M2 format for the demo model.

Every conversation is a list of OpenAI-style messages (plus tools, when it uses
them) that the official chat template renders, exactly as m2cpp renders a
request. Each assistant turn after the last user message carries a short
`reasoning_content`, which the template writes as `<think>\n...\n</think>\n\n`
before the answer; earlier turns lose theirs, as in the real model.

The facts come from WordNet 3.0 (definitions, kinds, parts, synonyms,
opposites, example phrases) and the Python glossary; stories, small talk,
arithmetic and the tool-call exchanges are written here from templates. The
answers are plain, short English sentences: that is what a model of ~10 M
parameters can learn to write in a few minutes of training.
"""

import json
import random
import re

# ---- small helpers ---------------------------------------------------------------


def article(word):
    return "an" if word[:1].lower() in "aeiou" else "a"


def cap(s):
    return s[:1].upper() + s[1:]


def words_list(items):
    """'a', 'a and b', 'a, b and c'."""
    items = list(items)
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " and " + items[-1]


def clean_definition(d):
    """WordNet gloss -> its first clause, a phrase that reads well after 'means'."""
    d = re.sub(r"^\([^)]*\)\s*", "", d)  # "(of weather) free from storms" -> "free from storms"
    d = d.split(";")[0]
    return re.sub(r"\s+", " ", d).strip().rstrip(":,")


# Words that can start a noun gloss without an article before them.
DETERMINERS = {"a", "an", "the", "any", "one", "some", "someone", "something", "somebody", "anything", "anyone",
               "either", "each", "every", "all", "two", "three", "four", "several", "many", "his", "her", "its",
               "their", "your", "my", "our", "this", "that", "these", "those", "no", "another", "much", "more",
               "most", "used", "having", "being", "in", "of", "on", "at", "by", "for", "with", "not", "informal",
               "slang", "(", "how", "what", "where", "when", "who", "which", "whatever", "whoever"}


def noun_definition(d):
    """A noun gloss as a noun phrase: 'fritter containing sliced apple' -> 'a fritter containing ...'."""
    d = clean_definition(d)
    first = d.split(" ")[0]
    plural = first.endswith("s") and not first.endswith(("ss", "us", "is"))
    if first.lower() in DETERMINERS or plural or first.endswith("ing"):
        return d
    return f"{article(first)} {d}"


def lemma_text(lemma):
    return lemma.replace("_", " ")


def pick(rng, options):
    return options[rng.randrange(len(options))]


# ---- WordNet facts -------------------------------------------------------------------


class Lexicon:
    """WordNet words that make good questions, weighted by how common they are."""

    def __init__(self, wn):
        self.wn = wn
        self.by_pos = {}
        for pos in ("n", "v", "a"):
            words, cum, total = [], [], 0.0
            for lemma, count in sorted(wn.counts[pos].items()):
                # Words seen in the concordance at least once (~12k nouns, ~5k
                # verbs, ~4k adjectives); the commonest come up most often.
                if count < 1 or not re.fullmatch(r"[a-z]+(?:_[a-z]+)?", lemma):
                    continue
                first = wn.synsets[wn.senses[pos][lemma][0]]
                if len(clean_definition(first.definition)) < 12:
                    continue
                words.append(lemma)
                total += (1 + min(count, 500)) ** 0.6
                cum.append(total)
            self.by_pos[pos] = (words, cum)

    def sample(self, rng, pos):
        words, cum = self.by_pos[pos]
        return rng.choices(words, cum_weights=cum)[0]

    def display(self, synset, lemma):
        """The lemma as the synset spells it ('paris' -> 'Paris'), underscores as spaces."""
        for l in synset.lemmas:
            if l.lower() == lemma:
                return lemma_text(l)
        return lemma_text(lemma)

    def first_sense(self, pos, lemma):
        return self.wn.synsets[self.wn.senses[pos][lemma][0]]

    def other_sense(self, pos, lemma):
        keys = self.wn.senses[pos][lemma]
        return self.wn.synsets[keys[1]] if len(keys) > 1 else None

    def names(self, synsets, exclude, k, rng):
        out = []
        for s in synsets:
            name = lemma_text(s.lemmas[0])
            if name.lower() != exclude.lower() and name not in out and len(name) < 30:
                out.append(name)
        rng.shuffle(out)
        return out[:k]

    def antonyms(self, synset, lemma):
        """Word-level antonyms of `lemma` in `synset` (WordNet '!' pointers)."""
        out = []
        for sym, key, srctgt in synset.ptrs:
            if sym != "!" or key not in self.wn.synsets:
                continue
            src, tgt = int(srctgt[:2], 16), int(srctgt[2:], 16)
            if src and synset.lemmas[src - 1].lower() == lemma.lower():
                out.append(lemma_text(self.wn.synsets[key].lemmas[tgt - 1]))
        return out


# ---- the generator ---------------------------------------------------------------------

SYSTEM_PROMPTS = [
    "You are a helpful assistant.",
    "You are a helpful assistant. Answer in simple English.",
    "You are a friendly assistant who explains things in a few short sentences.",
    "You are a kind teacher. Explain things clearly to a young student.",
    "You are a small demo model running on m2cpp. Be helpful and brief.",
]

CLOSINGS = ["I hope this helps!", "Would you like to know more?", "Let me know if you have another question.",
            "Is there anything else you would like to know?"]

ABOUT_QUESTIONS = [
    "Tell me about {x}.", "What is {x}?", "Can you tell me about {x}?", "Describe {x}.", "Explain {x} to me.",
    "I want to learn about {x}.", "What do you know about {x}?", "Please tell me about {x}.", "tell me about {x}",
    "what is {x}", "Could you explain what {x} is?", "Give me a short description of {x}.",
]


class ChatMaker:
    def __init__(self, wn, glossary, seed):
        self.lex = Lexicon(wn)
        self.wn = wn
        self.glossary = sorted(glossary.items())
        self.rng = random.Random(seed)

    # -- one conversation -------------------------------------------------------------

    def conversation(self):
        """(messages, tools or None), ready for the chat template."""
        rng = self.rng
        kinds = [(self.about_noun, 30), (self.word_meaning, 12), (self.synonym_or_opposite, 7),
                 (self.python_term, 4), (self.story, 12), (self.small_talk, 6), (self.arithmetic, 5),
                 (self.tool_call, 14), (self.multi_turn, 10)]
        make = rng.choices([k for k, _ in kinds], weights=[w for _, w in kinds])[0]
        return make()

    def with_system(self, turns, tools=None):
        rng = self.rng
        if tools is not None or rng.random() < 0.45:
            system = pick(rng, SYSTEM_PROMPTS)
            return [{"role": "system", "content": system}] + turns, tools
        return turns, tools

    def single(self, qa):
        question, reasoning, answer = qa
        return self.with_system([{"role": "user", "content": question},
                                 {"role": "assistant", "content": answer, "reasoning_content": reasoning}])

    def about_noun(self):
        return self.single(self.noun_qa())

    def word_meaning(self):
        return self.single(self.meaning_qa())

    def synonym_or_opposite(self):
        return self.single(self.relation_qa())

    def python_term(self):
        return self.single(self.python_qa())

    def story(self):
        return self.single(self.story_qa())

    def small_talk(self):
        return self.single(self.small_talk_qa())

    def arithmetic(self):
        return self.single(self.arithmetic_qa())

    def multi_turn(self):
        """Two or three exchanges; only the last answer keeps its reasoning in the prompt."""
        rng = self.rng
        makers = [self.noun_qa, self.noun_qa, self.meaning_qa, self.story_qa, self.small_talk_qa,
                  self.arithmetic_qa, self.relation_qa]
        turns = []
        for _ in range(rng.choice([2, 2, 3])):
            q, r, a = pick(rng, makers)()
            turns += [{"role": "user", "content": q}, {"role": "assistant", "content": a, "reasoning_content": r}]
        return self.with_system(turns)

    # -- question/answer makers: each returns (question, reasoning, answer) ----------------

    def noun_qa(self):
        rng, lex = self.rng, self.lex
        lemma = lex.sample(rng, "n")
        syn = lex.first_sense("n", lemma)
        word = lex.display(syn, lemma)
        proper = word[0].isupper()
        if proper:
            subject = word
        else:
            subject = pick(rng, ["the " + word, article(word) + " " + word, word])
        question = pick(rng, ABOUT_QUESTIONS).format(x=subject)
        if question[0].islower() and rng.random() < 0.5:
            question = cap(question)
        definition = noun_definition(syn.definition)
        Subj = subject if proper else cap(subject)

        sentences = [f"{Subj} is {definition}."]
        extra = []
        hypers = lex.names(self.wn.related(syn, {"@"}), word, 1, rng)
        instance_of = lex.names(self.wn.related(syn, {"@i"}), word, 1, rng)
        if hypers:
            extra.append(pick(rng, [f"It is a kind of {hypers[0]}.", f"It is one kind of {hypers[0]}.",
                                    f"You can think of it as a type of {hypers[0]}."]))
        if instance_of:
            extra.append(f"It is {article(instance_of[0])} {instance_of[0]}.")
        synonyms = [lemma_text(l) for l in syn.lemmas if l.lower() != lemma.lower()][:2]
        if synonyms:
            extra.append(pick(rng, [f"It is also called {words_list(synonyms)}.",
                                    f"Another name for it is {synonyms[0]}."]))
        kinds = lex.names(self.wn.related(syn, {"~"}), word, 3, rng)
        examples = lex.names(self.wn.related(syn, {"~i"}), word, 3, rng)
        if kinds:
            extra.append(pick(rng, [f"Some kinds of {word} are {words_list(kinds)}.",
                                    f"There are many kinds, such as {words_list(kinds)}."]))
        if examples:
            extra.append(f"Well-known examples are {words_list(examples)}.")
        parts = lex.names(self.wn.related(syn, {"%p"}), word, 3, rng)
        if parts:
            extra.append(pick(rng, [f"It has parts such as {words_list(parts)}.",
                                    f"Its parts include {words_list(parts)}."]))
        whole = lex.names(self.wn.related(syn, {"#p"}), word, 1, rng)
        if whole:
            extra.append(f"It is part of {article(whole[0])} {whole[0]}." if not whole[0][0].isupper()
                         else f"It is part of {whole[0]}.")
        group = lex.names(self.wn.related(syn, {"#m"}), word, 1, rng)
        if group:
            extra.append(f"It belongs to the group called {group[0]}.")
        if syn.examples:
            extra.append(pick(rng, [f'People say things like "{syn.examples[0]}".',
                                    f'For example: "{syn.examples[0]}".']))
        other = lex.other_sense("n", lemma)
        if other is not None and rng.random() < 0.5:
            extra.append(f'The word "{word}" can also mean {noun_definition(other.definition)}.')
        rng.shuffle(extra)
        sentences += extra[:rng.randint(1, 4)]
        if rng.random() < 0.15:
            sentences.append(pick(rng, CLOSINGS))

        short = definition.split(",")[0].split(";")[0]
        reasoning = pick(rng, [
            f"The user asks about {subject}. {Subj} is {short}. I will explain it in a few simple sentences.",
            f"The user wants to know about {subject}. I should give a short, clear answer.",
            f"The question is about {subject}. " +
            (f"It is a kind of {hypers[0]}. " if hypers else "") + "I will describe it simply.",
            f"This is a question about {subject}. I know that {subject} is {short}. Let me answer briefly.",
        ])
        return question, reasoning, " ".join(sentences)

    def meaning_qa(self):
        rng, lex = self.rng, self.lex
        pos = rng.choice(["v", "v", "a", "a", "n"])
        lemma = lex.sample(rng, pos)
        word = lemma_text(lemma)
        syn = lex.first_sense(pos, lemma)
        definition = clean_definition(syn.definition)
        if pos == "v":
            question = pick(rng, [f"What does it mean to {word}?", f'What does the verb "{word}" mean?',
                                  f'Explain the word "{word}".', f'What is the meaning of "{word}"?'])
            sentences = [f"To {word} means to {definition}."]
            hypers = lex.names(self.wn.related(syn, {"@"}), word, 1, rng)
            if hypers:
                sentences.append(f"It is a way to {hypers[0]}.")
        else:
            question = pick(rng, [f'What does "{word}" mean?', f'What is the meaning of the word "{word}"?',
                                  f'Explain the word "{word}".', f'What does the word {word} mean?'])
            sentences = [f'The word "{word}" means {definition}.']
        synonyms = [lemma_text(l) for l in syn.lemmas if l.lower() != lemma.lower()][:2]
        if synonyms:
            sentences.append(f"A word with a similar meaning is {synonyms[0]}.")
        if syn.examples:
            sentences.append(pick(rng, [f'For example: "{syn.examples[0]}".',
                                        f'You could say: "{syn.examples[0]}".']))
        ants = lex.antonyms(syn, lemma)
        if ants:
            sentences.append(f'The opposite is "{ants[0]}".')
        kind = {"v": "verb", "a": "adjective", "n": "noun"}[pos]
        reasoning = pick(rng, [
            f'The user wants the meaning of "{word}". It is {article(kind)} {kind}. I will explain it and give an example.',
            f'"{word}" is {article(kind)} {kind}. I should explain what it means in simple words.',
        ])
        return question, reasoning, " ".join(sentences)

    def relation_qa(self):
        rng, lex = self.rng, self.lex
        for _ in range(200):
            pos = rng.choice(["a", "a", "v", "n"])
            lemma = lex.sample(rng, pos)
            word = lemma_text(lemma)
            syn = lex.first_sense(pos, lemma)
            ants = lex.antonyms(syn, lemma)
            synonyms = [lemma_text(l) for l in syn.lemmas if l.lower() != lemma.lower()]
            similar = lex.names(self.wn.related(syn, {"&"}), word, 2, rng)
            if ants and rng.random() < 0.5:
                question = pick(rng, [f'What is the opposite of "{word}"?', f"What is the opposite of {word}?",
                                      f'Give me an antonym for "{word}".'])
                answer = f'The opposite of "{word}" is "{ants[0]}".'
                other = clean_definition(lex.first_sense(pos, ants[0].replace(" ", "_")).definition) \
                    if ants[0].replace(" ", "_") in self.wn.senses[pos] else None
                if other:
                    answer += f' "{cap(ants[0])}" means {other}.'
                reasoning = f'The user wants a word that means the opposite of "{word}". That word is "{ants[0]}".'
                return question, reasoning, answer
            alternatives = synonyms + similar
            if alternatives:
                question = pick(rng, [f'What is another word for "{word}"?', f"Give me a synonym for {word}.",
                                      f'What word means the same as "{word}"?'])
                answer = f'Another word for "{word}" is "{alternatives[0]}".'
                if len(alternatives) > 1:
                    answer += f' You could also say "{alternatives[1]}".'
                answer += f" Both mean {clean_definition(syn.definition)}." if len(alternatives) == 1 else ""
                reasoning = f'The user wants a synonym for "{word}". "{alternatives[0]}" has a similar meaning.'
                return question, reasoning, answer
        raise RuntimeError("no word with a synonym or antonym found")

    def python_qa(self):
        rng = self.rng
        term, definition = pick(rng, self.glossary)
        question = pick(rng, [f"What is {article(term)} {term} in Python?", f"In Python, what is {article(term)} {term}?",
                              f'What does "{term}" mean in Python?', f"Explain {term} in Python."])
        m = re.match(r"(An?|The) (.*)", definition)
        if m:
            answer = f"In Python, {article(term)} {term} is {m.group(1).lower()} {m.group(2)}"
        else:
            answer = f'In Python, "{term}" works like this. {definition}'
        reasoning = f'The user asks about "{term}", a Python term. I will give its definition from the Python documentation.'
        return question, reasoning, answer

    def story_qa(self):
        return make_story(self.rng)

    def small_talk_qa(self):
        rng = self.rng
        intent = pick(rng, SMALL_TALK)
        return pick(rng, intent["q"]), pick(rng, intent["think"]), pick(rng, intent["a"])

    def arithmetic_qa(self):
        rng = self.rng
        op = rng.choice(["plus", "minus", "times"])
        if op == "times":
            a, b = rng.randint(1, 10), rng.randint(1, 10)
            r, sym = a * b, "*"
        elif op == "plus":
            a, b = rng.randint(0, 50), rng.randint(0, 50)
            r, sym = a + b, "+"
        else:
            a = rng.randint(0, 50)
            b = rng.randint(0, a)
            r, sym = a - b, "-"
        question = pick(rng, [f"What is {a} {op} {b}?", f"How much is {a} {op} {b}?", f"What is {a} {sym} {b}?",
                              f"Calculate {a} {sym} {b}.", f"what's {a} {op} {b}"])
        reasoning = f"{a} {sym} {b} = {r}."
        answer = pick(rng, [f"{a} {op} {b} is {r}.", f"The answer is {r}.", f"{a} {sym} {b} = {r}."])
        return question, reasoning, answer

    # -- tool calls in the M2 XML format ------------------------------------------------------

    def tool_call(self):
        rng = self.rng
        tools = rng.sample(TOOLS, rng.randint(1, len(TOOLS)))
        names = {t["function"]["name"] for t in tools}
        handlers = {"get_weather": self._weather, "get_current_time": self._time,
                    "calculate": self._calculate, "lookup_word": self._lookup}
        usable = [n for n in handlers if n in names]
        if rng.random() < 0.15:
            # Tools are offered but not needed: answer directly.
            q, r, a = pick(rng, [self.noun_qa, self.small_talk_qa, self.story_qa])()
            return self.with_system([{"role": "user", "content": q},
                                     {"role": "assistant", "content": a, "reasoning_content": r}], tools)
        question, call, result, think1, think2, answer = handlers[pick(rng, usable)]()
        turns = [
            {"role": "user", "content": question},
            {"role": "assistant", "content": "", "reasoning_content": think1,
             "tool_calls": [{"type": "function", "function": call}]},
            {"role": "tool", "content": json.dumps(result)},
            {"role": "assistant", "content": answer, "reasoning_content": think2},
        ]
        return self.with_system(turns, tools)

    def _weather(self):
        rng = self.rng
        city = pick(rng, CITIES)
        unit = rng.choice(["celsius", "celsius", "fahrenheit"])
        cond = pick(rng, ["sunny", "cloudy", "rainy", "windy", "snowy", "foggy", "clear"])
        temp = rng.randint(-5, 35) if unit == "celsius" else rng.randint(25, 95)
        question = pick(rng, [f"What is the weather like in {city}?", f"What's the weather in {city} today?",
                              f"Is it cold in {city} right now?", f"How warm is it in {city}?"])
        args = {"location": city} if unit == "celsius" and rng.random() < 0.6 else {"location": city, "unit": unit}
        deg = "°C" if unit == "celsius" else "°F"
        think1 = f"The user wants to know the weather in {city}. I should call the get_weather tool."
        think2 = f"The tool says it is {cond} and {temp} {deg} in {city}. I will tell the user."
        answer = pick(rng, [f"It is {cond} in {city} right now, with a temperature of {temp} {deg}.",
                            f"Right now in {city} it is {cond} and {temp} {deg}."])
        return question, {"name": "get_weather", "arguments": args}, \
            {"location": city, "temperature": temp, "unit": unit, "condition": cond}, think1, think2, answer

    def _time(self):
        rng = self.rng
        city = pick(rng, CITIES)
        hh, mm = rng.randint(0, 23), rng.randint(0, 59)
        t = f"{hh:02d}:{mm:02d}"
        question = pick(rng, [f"What time is it in {city}?", f"Can you tell me the current time in {city}?",
                              f"what time is it now in {city}"])
        think1 = f"The user asks for the current time in {city}. I will use the get_current_time tool."
        think2 = f"The tool returned {t} for {city}."
        answer = pick(rng, [f"It is {t} in {city} right now.", f"The current time in {city} is {t}."])
        return question, {"name": "get_current_time", "arguments": {"city": city}}, \
            {"city": city, "time": t}, think1, think2, answer

    def _calculate(self):
        rng = self.rng
        a, b = rng.randint(11, 999), rng.randint(2, 99)
        op, sym = pick(rng, [("times", "*"), ("plus", "+"), ("minus", "-")])
        r = a * b if sym == "*" else a + b if sym == "+" else a - b
        expr = f"{a} {sym} {b}"
        question = pick(rng, [f"What is {a} {op} {b}?", f"Please calculate {expr}.", f"Can you work out {expr}?"])
        think1 = f"This needs an exact calculation: {expr}. I will use the calculate tool."
        think2 = f"The tool says {expr} = {r}."
        answer = pick(rng, [f"{a} {op} {b} is {r}.", f"The result of {expr} is {r}."])
        return question, {"name": "calculate", "arguments": {"expression": expr}}, {"result": r}, \
            think1, think2, answer

    def _lookup(self):
        rng, lex = self.rng, self.lex
        pos = rng.choice(["n", "v", "a"])
        lemma = lex.sample(rng, pos)
        word = lemma_text(lemma)
        definition = clean_definition(lex.first_sense(pos, lemma).definition)
        question = pick(rng, [f'Look up the word "{word}" for me.', f'Can you check the dictionary for "{word}"?',
                              f'Use the dictionary to tell me what "{word}" means.'])
        think1 = f'The user wants a dictionary entry for "{word}". I will call lookup_word.'
        think2 = f'The dictionary says "{word}" means {definition}.'
        answer = f'According to the dictionary, "{word}" means {definition}.'
        return question, {"name": "lookup_word", "arguments": {"word": word}}, \
            {"word": word, "definition": definition}, think1, think2, answer


TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {
            "location": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["location"]}}},
    {"type": "function", "function": {
        "name": "get_current_time", "description": "Get the current local time in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "calculate", "description": "Evaluate an arithmetic expression",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                       "required": ["expression"]}}},
    {"type": "function", "function": {
        "name": "lookup_word", "description": "Look up the meaning of an English word in a dictionary",
        "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}}},
]

CITIES = ["Paris", "London", "Tokyo", "Berlin", "Madrid", "Rome", "Cairo", "Sydney", "Toronto", "Lima",
          "Oslo", "Dublin", "Nairobi", "Seoul", "Mumbai", "Chicago", "Boston", "Lisbon", "Vienna", "Prague",
          "Shanghai", "Mexico City", "New York", "Cape Town", "Buenos Aires", "Helsinki", "Athens", "Warsaw"]

SMALL_TALK = [
    {"q": ["Hello!", "Hi!", "Hi there!", "Hello, how are you?", "Good morning!", "Hey!", "hello", "hi"],
     "think": ["The user is greeting me. I will greet them back and offer help.",
               "A friendly greeting. I should answer warmly."],
     "a": ["Hello! How can I help you today?", "Hi! I am doing well, thank you. What would you like to talk about?",
           "Hello there! I am happy to help. What would you like to know?"]},
    {"q": ["Who are you?", "What are you?", "What is your name?", "Tell me about yourself.", "who are you"],
     "think": ["The user wants to know who I am. I am a small demo model that runs on m2cpp.",
               "The user asks about me. I should explain what I am in a few words."],
     "a": ["I am a small demo model with the MiniMax-M2 architecture. I was trained to show that m2cpp works. "
           "I can explain words, answer simple questions and tell short stories, but I know very little.",
           "I am a tiny assistant trained for the m2cpp demo. I have the same design as MiniMax-M2, but I am "
           "much smaller, so my answers are short and sometimes wrong."]},
    {"q": ["What can you do?", "How can you help me?", "What are you good at?", "what can you do"],
     "think": ["The user asks what I can do. I will list a few simple things."],
     "a": ["I can tell you about things like animals, places and objects, explain what words mean, tell short "
           "stories, do simple sums and call tools such as a weather service.",
           "I can answer simple questions, explain words, tell a short story or use a tool if one is given to me."]},
    {"q": ["Thank you!", "Thanks!", "Thanks a lot.", "thank you", "That was helpful, thanks."],
     "think": ["The user is thanking me. I will reply politely."],
     "a": ["You are welcome! Let me know if you need anything else.", "You're welcome! I am glad I could help."]},
    {"q": ["Goodbye!", "Bye!", "See you later.", "bye"],
     "think": ["The user is saying goodbye. I will say goodbye too."],
     "a": ["Goodbye! Have a nice day.", "Bye! It was nice talking to you."]},
    {"q": ["How are you?", "How are you today?", "How is it going?"],
     "think": ["The user asks how I am. I will answer kindly and ask how I can help."],
     "a": ["I am fine, thank you for asking! How can I help you?", "I am doing well. What can I do for you today?"]},
    {"q": ["Are you a human?", "Are you a real person?"],
     "think": ["The user asks if I am human. I am a language model, so I will say so."],
     "a": ["No, I am not a human. I am a small language model running on a computer.",
           "No. I am a computer program, a small language model."]},
    {"q": ["What is m2cpp?", "Tell me about m2cpp."],
     "think": ["The user asks about m2cpp, the program that runs me."],
     "a": ["m2cpp is an inference engine written in C++ for the MiniMax-M2 family of models. It runs me on your "
           "computer's processor.",
           "m2cpp is a C++ program that runs MiniMax-M2 models. I am a tiny model it uses for its demo."]},
]

# ---- stories ------------------------------------------------------------------------------

ANIMALS = ["cat", "dog", "fox", "rabbit", "bear", "mouse", "owl", "duck", "frog", "horse", "turtle", "bird",
           "lion", "squirrel", "deer", "goat", "whale", "fish", "pig", "sheep"]
NAMES = ["Tom", "Lily", "Max", "Sam", "Mia", "Ben", "Anna", "Leo", "Ruby", "Jack", "Emma", "Finn", "Rosa", "Tim",
         "Nora", "Oscar", "Lucy", "Hugo", "Ella", "Kai"]
PLACES = ["in a small village", "near a big forest", "by the sea", "on a quiet farm", "in a green valley",
          "at the edge of a lake", "in a busy town", "on a high hill"]
WANTS = [("to find a shiny stone", "found a shiny stone under an old tree"),
         ("to see the sea", "reached the sea and watched the waves"),
         ("to make a new friend", "met a new friend who liked to play"),
         ("to fly a red kite", "flew the red kite high in the sky"),
         ("to climb the tallest tree", "climbed to the top of the tallest tree"),
         ("to bake a big cake", "baked a big, sweet cake"),
         ("to find the way home", "found the way home before dark"),
         ("to learn to swim", "learned to swim across the pond")]
PROBLEMS = ["But it started to rain.", "But the path was long and hard.", "But {he} was very small.",
            "But {he} did not know the way.", "But a strong wind began to blow.", "But {he} felt a little scared."]
HELPERS = ["a kind old owl", "a friendly dog", "a wise turtle", "a little girl", "a helpful bird", "a brave mouse"]
MORALS = ["{Name} learned that friends make everything easier.", "{Name} learned to never give up.",
          "From that day on, {name} was never afraid again.", "It was the best day of {his} life.",
          "{Name} smiled and went to sleep, happy and tired."]


def make_story(rng):
    animal = pick(rng, ANIMALS)
    name = pick(rng, NAMES)
    he, his = pick(rng, [("he", "his"), ("she", "her")])
    want, done = pick(rng, WANTS)
    place = pick(rng, PLACES)
    helper = pick(rng, HELPERS)
    fill = {"he": he, "his": his, "name": name, "Name": name}
    question = pick(rng, [f"Tell me a short story about a {animal}.", f"Write a story about a {animal}.",
                          "Tell me a story.", "Can you tell me a bedtime story?",
                          f"Write a short story about a {animal} named {name}.", f"tell me a story about a {animal}"])
    sents = [
        pick(rng, [f"Once upon a time, there was a little {animal} named {name}.",
                   f"There once was a {animal} called {name}."]),
        f"{cap(he)} lived {place}.",
        pick(rng, [f"Every day, {name} wanted {want}.", f"{name} had a dream: {he} wanted {want}."]),
        pick(rng, PROBLEMS).format(**fill),
        pick(rng, [f"Then {helper} came by and said, \"Do not worry, I will help you.\"",
                   f"Soon {helper} saw {name} and offered to help."]),
        pick(rng, [f"Together, they tried again, and at last {name} {done}.",
                   f"With a little help, {name} {done}."]),
        pick(rng, MORALS).format(**fill),
    ]
    reasoning = pick(rng, [f"The user wants a short story. I will write a simple story about a {animal} named {name} "
                           "with a happy ending.",
                           f"A story about a {animal}. I will keep it short and kind."])
    return question, reasoning, " ".join(sents)
