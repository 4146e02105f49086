"""The tools: one module per area, each with its request and result types, the functions that
do the work, and their registry entries (`TOOLS`). Nothing here knows of Typer, Rich or MCP."""
