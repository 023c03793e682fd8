"""A small MCP server over stdio for tests/test_mcp.py (the MCP SDK's own server)."""

from mcp.server.mcpserver import MCPServer

app = MCPServer("calc")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@app.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(reason)


@app.tool()
def secret() -> str:
    """Not offered when allowed_tools leaves it out."""
    return "hidden"


if __name__ == "__main__":
    app.run()
