"""The worker's side of a task: the activities AgentWorkflow schedules (preparing a task, model
calls, tool calls, guard and output checks, remote MCP tools) and the Registry of what a worker can
run."""
