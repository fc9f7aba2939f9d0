"""Remote MCP servers: configuration (``config``) and the worker's live connections (``connections``).

``config`` is pure and shared with the client; ``connections`` imports the ``mcp`` SDK (the
``noeta[mcp]`` extra) and is used only by the worker's activities.
"""
