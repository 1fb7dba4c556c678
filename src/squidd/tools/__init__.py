"""The built-in tools the model may call, one module each, their arguments declared once
as pydantic models (arguments.py); the MCP servers' tools are in mcp/."""
