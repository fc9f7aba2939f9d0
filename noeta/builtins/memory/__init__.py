"""The memory tool and the file-per-memory store it shares with the host (see
:mod:`noeta.builtins.memory.tool` and :mod:`noeta.builtins.memory.impl`)."""
