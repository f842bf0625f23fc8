"""A harness as a tool: the Oumi tool endpoint over HTTP (`POST /oumi/tools/<harness_id>`)
and over MCP (`POST /mcp`), both answering with the harness result object."""
