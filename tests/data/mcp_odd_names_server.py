"""An MCP server with a tool whose name no LLM provider accepts, for tests/test_mcp.py."""

from mcp.server.mcpserver import MCPServer

app = MCPServer("odd")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@app.tool(name="get weather")
def get_weather(city: str) -> str:
    """A name with a space: every provider refuses a request offering it."""
    return f"sunny in {city}"


if __name__ == "__main__":
    app.run()
