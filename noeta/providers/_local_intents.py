"""What a prompt asks of the built-in tools, read by rules: the local default's argument extractor.

The tool router (:mod:`noeta.providers.needle_router`) is a 121M model: it picks tools well but
fills arguments loosely ("345 + 678 - 123" came back as ``"345, 678"``, "(48-12)/4" as
``"48 - 12"``) and is unsure of operators written as words. For the four built-in tools whose
arguments are plain spans of the prompt, this module reads them exactly:

- ``calculator``: the longest span that is a whole arithmetic expression (every operand, operator,
  parenthesis and decimal), with operators in words ("divided by", "to the power of", "squared",
  "add 2 and 3", "subtract 2 from 9") written as symbols first;
- ``word_count``: the quoted text, else the text after a colon;
- ``read_file``: a file name (``name.ext``, maybe under folders) next to a verb that asks to read;
- ``current_time``: a question about the current time or date.

Each rule fires only on its own pattern and yields arguments that pass the tool's schema and
evaluate, so a prompt that matches none is left to the router (and chit-chat to the text model).
Pure and deterministic: the same text always gives the same intents.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from noeta.builtins.tools import MAX_EXPRESSION_CHARS, as_python_operators

CALCULATOR, WORD_COUNT, READ_FILE, CURRENT_TIME = "calculator", "word_count", "read_file", "current_time"
#: The argument each rule fills, by tool: a tool of that name whose schema lacks it is not ours.
ARGUMENT = {CALCULATOR: "expression", WORD_COUNT: "text", READ_FILE: "path", CURRENT_TIME: None}


@dataclass(frozen=True)
class Intent:
    """A call of built-in ``tool`` with the ``arguments`` read from the prompt."""

    tool: str
    arguments: dict[str, Any]


_NUMBER = r"\d+(?:\.\d+)?"
#: Operators written as words, longest first so "multiplied by" wins over "by".
_WORD_OPERATORS = [
    (r"raised to the power of|to the power of|raised to", "**"),
    (r"multiplied by|times", "*"),
    (r"divided by|over", "/"),
    (r"plus", "+"),
    (r"minus", "-"),
    (r"modulo|mod", "%"),
]
#: "add 2 and 3" style phrases: the verb's operands in the order the expression takes them.
_VERB_PHRASES = [
    (rf"\b(?:add|sum)\s+({_NUMBER})\s+(?:and|to|with)\s+({_NUMBER})", r"\1 + \2"),
    (rf"\bsum of\s+({_NUMBER})\s+and\s+({_NUMBER})", r"\1 + \2"),
    (rf"\bsubtract\s+({_NUMBER})\s+from\s+({_NUMBER})", r"\2 - \1"),
    (rf"\bdifference between\s+({_NUMBER})\s+and\s+({_NUMBER})", r"\1 - \2"),
    (rf"\bmultiply\s+({_NUMBER})\s+(?:by|and|with)\s+({_NUMBER})", r"\1 * \2"),
    (rf"\bproduct of\s+({_NUMBER})\s+and\s+({_NUMBER})", r"\1 * \2"),
    (rf"\bdivide\s+({_NUMBER})\s+by\s+({_NUMBER})", r"\1 / \2"),
    (rf"({_NUMBER})\s+squared\b", r"\1 ** 2"),
    (rf"({_NUMBER})\s+cubed\b", r"\1 ** 3"),
    (rf"\bsquare of\s+({_NUMBER})", r"\1 ** 2"),
]
_EXPRESSION_TOKEN = re.compile(rf"{_NUMBER}|\*\*|//|[-+*/%^×÷()]")
_OPERATOR = re.compile(r"\*\*|//|[-+*/%^×÷]")


def _symbolic(text: str) -> str:
    """``text`` with thousands separators dropped and arithmetic words written as symbols."""
    out = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)
    for pattern, replacement in _VERB_PHRASES:
        out = re.sub(pattern, replacement, out, flags=re.IGNORECASE)
    for pattern, symbol in _WORD_OPERATORS:
        out = re.sub(rf"(?<=[\d)])\s*\b(?:{pattern})\b\s*(?=[\d(])", f" {symbol} ", out, flags=re.IGNORECASE)
    return re.sub(r"(?<=\d)\s*[x×]\s*(?=\d)", " * ", out)


def _parses(expression: str) -> bool:
    """Whether the calculator would parse ``expression`` as a binary operation (it may still refuse
    to compute it, e.g. a division by zero, and says so in its result)."""
    try:
        tree = ast.parse(as_python_operators(expression), mode="eval")
    except SyntaxError:
        return False
    return isinstance(tree.body, ast.BinOp)


def arithmetic(text: str) -> str | None:
    """The longest whole arithmetic expression in ``text`` (at least one binary operator), as the
    calculator takes it; None when there is none."""
    symbolic = _symbolic(text)
    tokens = [(m.start(), m.end()) for m in _EXPRESSION_TOKEN.finditer(symbolic)]
    best: str | None = None
    i = 0
    while i < len(tokens):
        # A run of tokens separated only by blanks.
        j = i
        while j + 1 < len(tokens) and not symbolic[tokens[j][1]:tokens[j + 1][0]].strip():
            j += 1
        whole = " ".join(symbolic[tokens[i][0]:tokens[j][1]].split())
        if len(whole) > MAX_EXPRESSION_CHARS:
            # Longer than the calculator takes: passed whole, for it to refuse in words, rather
            # than a piece of it computed as if it were the question (and no search of its pieces).
            if _OPERATOR.search(whole) and (best is None or len(whole) > len(best)):
                best = whole
            i = j + 1
            continue
        for start in range(i, j + 1):  # the longest sub-run that parses (unbalanced edges trimmed)
            for end in range(j, start - 1, -1):
                candidate = " ".join(symbolic[tokens[start][0]:tokens[end][1]].split())
                if _OPERATOR.search(candidate.lstrip("-")) and _parses(candidate):
                    if best is None or len(candidate) > len(best):
                        best = candidate
                    break
        i = j + 1
    return best


_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”|(?<![A-Za-z])'([^']+?)'(?![A-Za-z])")
_ASKS_WORDS = re.compile(r"\bhow many words\b|\bcount\b[^.?!]*\bwords?\b|\bword count\b|\bnumber of words\b",
                         re.IGNORECASE)


def _quoted(text: str) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), next(g for g in m.groups() if g is not None)) for m in _QUOTED.finditer(text)]


def word_count_text(text: str) -> str | None:
    """The text whose words ``text`` asks to count: the quoted part, else what follows a colon."""
    if not _ASKS_WORDS.search(text):
        return None
    quoted = _quoted(text)
    if quoted:
        return quoted[0][2]
    after_colon = text.split(":", 1)[1].strip() if ":" in text else ""
    return after_colon.rstrip("?") or None


_FILE_NAME = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.[A-Za-z][A-Za-z0-9]{0,5})(?![\w/])")
_ASKS_READ = re.compile(
    r"\b(?:read|open|show|display|print|cat|contents?|look inside|what(?:'s| is) in|what does|inside)\b", re.IGNORECASE
)


def file_name(text: str) -> str | None:
    """The file ``text`` asks to read, when it names one next to a verb that asks to read it."""
    if not _ASKS_READ.search(text):
        return None
    found = _FILE_NAME.search(text)
    return found.group(1) if found else None


_ASKS_TIME = re.compile(
    # "what is the time" but not "what is the time complexity": the phrase ends the question or
    # goes on with "is it", "now", "today", "in UTC", "and", "please", "right now".
    r"\bwhat(?:'s| is)?\s+(?:the\s+)?(?:current\s+)?(?:date|time|day)\b"
    r"(?=\s*(?:[?.!,]|$|(?:is|now|today|in|and|please|right)\b))"
    r"|\b(?:current|today's)\s+(?:utc\s+)?(?:date|time)\b"
    r"|\btime\s+(?:is\s+it|now)\b|\bdate\s+today\b"
    r"|\btell me the\s+(?:current\s+)?(?:date|time)\b|\bwhat time\b|\bwhat day\b",
    re.IGNORECASE,
)


def asks_time(text: str) -> bool:
    """Whether ``text`` asks for the current time or date."""
    return _ASKS_TIME.search(text) is not None


_ASKS_CALCULATION = re.compile(r"\b(?:calculate|compute|evaluate|work out)\b", re.IGNORECASE)


def needs(text: str) -> list[str]:
    """The built-in tools ``text`` needs an answer from, even where no argument could be read
    (a count of words with nothing quoted, "calculate" with numbers but no expression): a model
    that answers such a question without the tool's result would make the result up."""
    tools = [intent.tool for intent in intents(text)]
    # "Work out a plan" asks for no sum: a calculation with no number in sight is the text model's.
    asks_sum = _ASKS_CALCULATION.search(text) is not None and re.search(r"\d", text) is not None
    for tool, asks in ((WORD_COUNT, _ASKS_WORDS.search(text) is not None), (CALCULATOR, asks_sum)):
        if asks and tool not in tools:
            tools.append(tool)
    return tools


def intents(text: str) -> list[Intent]:
    """The built-in tool calls ``text`` asks for, in the order their tools are listed above."""
    found: list[Intent] = []
    words = word_count_text(text)
    if words is not None:
        found.append(Intent(WORD_COUNT, {"text": words}))
    path = file_name(text)
    if path is not None:
        found.append(Intent(READ_FILE, {"path": path}))
    # Quoted text is the word count's, and a file's name is no sum: neither is read as arithmetic.
    rest = text
    for start, end, _ in reversed(_quoted(text)):
        rest = rest[:start] + " " + rest[end:]
    if path is not None:
        rest = rest.replace(path, " ")
    expression = arithmetic(rest)
    if expression is not None:
        found.insert(0, Intent(CALCULATOR, {"expression": expression}))
    if asks_time(text):
        found.append(Intent(CURRENT_TIME, {}))
    return found


def served(intent: Intent, tools: list[dict[str, Any]]) -> bool:
    """Whether ``tools`` has the built-in tool ``intent`` is for (same name, the argument it fills)."""
    for tool in tools:
        if tool.get("name") == intent.tool:
            argument = ARGUMENT[intent.tool]
            properties = (tool.get("input_schema") or {}).get("properties") or {}
            return argument is None or argument in properties
    return False
