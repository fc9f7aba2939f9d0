"""The local default's argument rules: whole expressions, quoted text, file names, time questions;
nothing read from prompts that ask none of them."""

from __future__ import annotations

import pytest

from noeta.builtins.tools import BUILTIN_TOOLS, evaluate, format_number
from noeta.providers._local_intents import Intent, intents, needs, served

SCHEMAS = [{"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in BUILTIN_TOOLS]


@pytest.mark.parametrize(("prompt", "value"), [
    ("What is 345 + 678 - 123 altogether?", "900"),  # every operand kept (the router gave "345, 678")
    ("Give me (48-12)/4 please", "9"),  # parentheses kept (the router gave "48 - 12")
    ("What is 7.5 * 2.2?", "16.5"),
    ("How much is 90 divided by 4?", "22.5"),
    ("What is 5 to the power of 3?", "125"),
    ("What is 11 squared?", "121"),
    ("What is 40 plus 2 times 3?", "46"),
    ("Subtract 7 from 50.", "43"),
    ("Add 1,250 and 750.", "2000"),
    ("Multiply 12 by 11.", "132"),
    ("Divide 99 by 3.", "33"),
    ("What's 3 ^ 4?", "81"),
    ("Is 6x7 right?", "42"),
    ("((2 + 3) * 4) - 1 = ?", "19"),
])
def test_an_arithmetic_question_gives_the_whole_expression(prompt: str, value: str):
    found = intents(prompt)
    assert [i.tool for i in found] == ["calculator"]
    assert format_number(evaluate(found[0].arguments["expression"])) == value


@pytest.mark.parametrize(("prompt", "text"), [
    ("How many words are in 'ship it today'?", "ship it today"),
    ('Count the words of "alpha beta gamma delta"', "alpha beta gamma delta"),
    ("Number of words: jobs run on workers", "jobs run on workers"),
    ("How many words are in “typographic quotes work too”?", "typographic quotes work too"),
])
def test_a_word_count_gets_the_quoted_or_trailing_text(prompt: str, text: str):
    assert intents(prompt) == [Intent("word_count", {"text": text})]


@pytest.mark.parametrize(("prompt", "path"), [
    ("Read plan.md", "plan.md"),
    ("What does docs/guide.rst say?", "docs/guide.rst"),
    ("Please open my-notes.txt", "my-notes.txt"),
    ("Show the contents of v2.json", "v2.json"),
])
def test_a_file_to_read_is_named_whole(prompt: str, path: str):
    assert intents(prompt) == [Intent("read_file", {"path": path})]


@pytest.mark.parametrize("prompt", ["What time is it in UTC?", "What's the date?", "current time?", "What day is it?"])
def test_a_time_question_asks_for_the_time(prompt: str):
    assert intents(prompt) == [Intent("current_time", {})]


def test_several_asks_in_one_prompt_each_get_their_call():
    found = intents("How many words are in 'one 2 three', what is 3 * 3, and what time is it?")
    assert found == [
        Intent("calculator", {"expression": "3 * 3"}),  # the quoted "2" is the word count's, not a sum
        Intent("word_count", {"text": "one 2 three"}),
        Intent("current_time", {}),
    ]
    assert intents("Read data-2024.csv") == [Intent("read_file", {"path": "data-2024.csv"})]


@pytest.mark.parametrize("prompt", [
    "Hello!", "Thanks, that's all.", "What is your name?", "Tell me about durable execution.",
    "What is the time complexity of quicksort?", "Wait for 3 seconds.", "I have 2 cats and 3 dogs.",
    "Version 1.2 is out.", "Call Ana at 5pm.",
])
def test_prompts_that_ask_no_built_in_tool_give_no_call(prompt: str):
    assert intents(prompt) == []
    assert needs(prompt) == []


def test_a_question_that_needs_a_tool_is_known_even_without_its_argument():
    assert needs("How many words are in my essay?") == ["word_count"]
    assert needs("Calculate the total of the 3 invoices") == ["calculator"]
    assert needs("What is 2 + 2?") == ["calculator"]
    assert needs("Let's work out a plan for the launch.") == []  # no number: nothing to compute


def test_an_expression_longer_than_the_calculator_takes_is_passed_whole_for_it_to_refuse():
    import time

    from noeta.builtins.tools import MAX_EXPRESSION_CHARS
    from noeta.errors import ToolInputError

    started = time.perf_counter()
    found = intents("What is " + " + ".join(["1"] * 5000) + "?")
    assert time.perf_counter() - started < 2  # no search among its pieces
    [call] = found
    assert call.tool == "calculator" and len(call.arguments["expression"]) > MAX_EXPRESSION_CHARS
    with pytest.raises(ToolInputError, match="longer than"):
        evaluate(call.arguments["expression"])


def test_a_rule_applies_only_to_the_built_in_tool_it_knows():
    calc = Intent("calculator", {"expression": "1 + 1"})
    assert served(calc, SCHEMAS)
    # A user's own tool of that name with other arguments is not the calculator the rule fills.
    assert not served(calc, [{"name": "calculator", "input_schema": {"type": "object", "properties": {"a": {}}}}])
    assert not served(calc, [])
