"""Where a task's bulky data lives outside Temporal's history: the content store of bodies,
transcript chains, the step records of finished calls, and the composition of the model's
context."""
