"""The prompts bench/local_model.py scores the embedded default model on.

Two sets, kept apart: ``TUNING`` is what the router's and the writer's rules were tuned on;
``HELD_OUT`` was written before any of that tuning (2026-12-01) and is only ever measured, so its
figures say how the model does on prompts nobody fitted it to. Each case names its family, the
tools it needs and what their outputs must be (the arguments were right when they are).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    prompt: str
    family: str
    """arithmetic, words, time, file, both (two tools) or chat (no tool)."""
    tools: tuple[str, ...] = ()
    """Expected tool names, in any order (empty: no tool should be called)."""
    results: tuple[str, ...] = ()
    """Expected outputs of those tools (right arguments); empty: not checked (e.g. the time)."""


#: Files in the benchmark's workspace. ``missing.txt`` is deliberately absent.
FILES = {
    "notes.txt": "Buy milk. Call Ana at 5pm.",
    "todo.txt": "Ship the release on Friday.",
    "config.ini": "[server]\nport = 8080",
    "report.md": "Q3 revenue grew 12 percent.",
    "data.csv": "id,name\n1,Ada\n2,Linus",
    "readme.txt": "Run make install first.",
    "shopping-list.txt": "eggs, flour, butter",
    "logs/app.log": "ERROR disk full at 03:12",
    "recipe.txt": "Mix flour and water, bake 20 minutes.",
    "settings.yaml": "retries: 3\ntimeout: 30",
    "summary.txt": "All 40 tasks completed.",
}
MISSING_FILE_ERROR = "no file 'missing.txt' in the workspace"


def _calc(prompt: str, value: str) -> Case:
    return Case(prompt, "arithmetic", ("calculator",), (value,))


def _words(prompt: str, count: int) -> Case:
    return Case(prompt, "words", ("word_count",), (str(count),))


def _time(prompt: str) -> Case:
    return Case(prompt, "time", ("current_time",))


def _file(prompt: str, name: str) -> Case:
    return Case(prompt, "file", ("read_file",), (FILES.get(name, MISSING_FILE_ERROR),))


def _chat(prompt: str) -> Case:
    return Case(prompt, "chat")


TUNING = [
    _calc("What is 37 * 91?", "3367"),
    _calc("Compute 1234 + 4321.", "5555"),
    _calc("What is 2 to the power of 10?", "1024"),
    _calc("Calculate 144 / 12.", "12"),
    _calc("What is (15 + 27) * 3?", "126"),
    _calc("What is 999 - 333?", "666"),
    _calc("Multiply 25 by 4.", "100"),
    _calc("What is 7 times 8?", "56"),
    _words("How many words are in 'the quick brown fox jumps over the lazy dog'?", 9),
    _words("Count the words in: durable execution survives crashes", 4),
    _words("How many words does this sentence have: 'Temporal keeps workflow history forever'", 5),
    _words('Word count of "one two three"', 3),
    _time("What time is it?"),
    _time("What's the current date and time in UTC?"),
    _time("Tell me the time now."),
    _file("Read the file notes.txt", "notes.txt"),
    _file("Show me what is in todo.txt", "todo.txt"),
    _file("Open config.ini and show its contents", "config.ini"),
    Case("Wait for 2 seconds.", "wait", ("wait",), ("waited 2 seconds",)),
    Case("Please wait 1 second.", "wait", ("wait",), ("waited 1 seconds",)),
    Case("What is 37 * 91, and what time is it?", "both", ("calculator", "current_time")),
    Case("How many words are in 'Durable agents survive crashes', and what is 12 * 12?", "both",
         ("word_count", "calculator"), ("4", "144")),
    _chat("Hello!"),
    _chat("Tell me a joke."),
    _chat("Thanks, that's all."),
    _chat("Write one sentence about durable execution."),
]

HELD_OUT = [
    _calc("What is 345 + 678 - 123?", "900"),
    _calc("Compute (48-12)/4", "9"),
    _calc("What is 100 divided by 8?", "12.5"),
    _calc("What is 3 to the power of 4?", "81"),
    _calc("Calculate 2.5 * 4.2", "10.5"),
    _calc("How much is 17 plus 26?", "43"),
    _calc("What's 1000 minus 1?", "999"),
    _calc("Please work out 12 * (7 + 5) - 6", "138"),
    _calc("What is 81 / 9 + 2 * 3?", "15"),
    _calc("Evaluate 7 ** 3", "343"),
    _calc("What does 64 multiplied by 32 equal?", "2048"),
    _calc("What is 0.1 + 0.2?", "0.3"),
    _calc("Add 458 and 932.", "1390"),
    _calc("Subtract 250 from 1000.", "750"),
    _calc("What is 9 squared?", "81"),
    _calc("What is the result of (3 + 5) * (10 - 4)?", "48"),
    _calc("I need 56 / 7 computed.", "8"),
    _calc("Calculate 1.5 + 2.25 + 3.125", "6.875"),
    _calc("What is 12 times 12 minus 4?", "140"),
    _calc("How much is 2 ^ 8?", "256"),
    _calc("Divide 144 by 16.", "9"),
    _calc("What's 5 * 6 * 7?", "210"),
    _words("How many words are in 'a b c d e'?", 5),
    _words("Count the words in this text: 'Workers poll task queues for new work'", 7),
    _words('How many words does "to be or not to be" contain?', 6),
    _words("Word count: the cat sat on the mat", 6),
    _words("Please count the words of 'hello world'", 2),
    _words("How many words are there in the sentence 'Agents call tools and wait for results'?", 7),
    _words("Tell me the number of words in 'one'", 1),
    _words('Count words: "Retries follow the maximum number of attempts"', 7),
    _words("How many words in 'Temporal workflows are deterministic and replayable by design'?", 8),
    _words("What is the word count of 'red green blue yellow'?", 4),
    _words("Count how many words are in: never lose work again", 4),
    _words("How many words are in the phrase 'approval waits for a human'?", 5),
    _time("What time is it right now?"),
    _time("What is today's date?"),
    _time("Give me the current UTC time."),
    _time("What's the date today?"),
    _time("Do you know what time it is?"),
    _time("Current time, please."),
    _time("What day and time is it now?"),
    _time("Tell me the current date."),
    _file("Read report.md", "report.md"),
    _file("What is in data.csv?", "data.csv"),
    _file("Show the contents of readme.txt", "readme.txt"),
    _file("Open shopping-list.txt", "shopping-list.txt"),
    _file("Can you read the file logs/app.log for me?", "logs/app.log"),
    _file("What does recipe.txt say?", "recipe.txt"),
    _file("Display settings.yaml", "settings.yaml"),
    _file("Read summary.txt and tell me what it says.", "summary.txt"),
    _file("Look inside data.csv", "data.csv"),
    _file("Read the file missing.txt", "missing.txt"),
    _file("Open the file called readme.txt", "readme.txt"),
    _file("Show me report.md", "report.md"),
    _chat("Hi there!"),
    _chat("Good morning."),
    _chat("What is your name?"),
    _chat("Say something nice."),
    _chat("Thank you!"),
    _chat("Can you help me?"),
    _chat("Describe yourself in one sentence."),
    _chat("Goodbye."),
    _chat("Write a haiku about rain."),
    _chat("What is durable execution?"),
]

SETS = {"tuning": TUNING, "held-out": HELD_OUT}
