"""The tools and the policy that ship with Noeta: the built-in tools (calculator, word_count, read_file,
current_time, wait), the memory tool and its store, and the default LLM policy."""
