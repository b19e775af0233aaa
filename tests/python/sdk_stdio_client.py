"""Third-party oracle: the official Python MCP SDK (1.x) drives the bridge over stdio.

usage: python sdk_stdio_client.py BRIDGE_BINARY SKILLS_DIR DATA_DIR
Exits non-zero (with an assertion message) when the bridge misbehaves.
"""
import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(binary: str, skills: str, data: str) -> None:
    params = StdioServerParameters(command=binary, args=["--dev", "--data-dir", data, "--skills-dir", skills])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.protocolVersion == "2025-11-25", init.protocolVersion
            assert init.serverInfo.name == "cyberos-mcp-bridge", init.serverInfo
            tools = (await session.list_tools()).tools
            names = sorted(t.name for t in tools)
            assert len(names) == 8, names
            assert "cyberos.cuo.execute_workflow" in names, names
            result = await session.call_tool("cyberos.skill.list_skills", {"query": "release"})
            assert not result.isError, result
            assert result.structuredContent["skills"][0]["name"] == "release-notes", result.structuredContent
            assert json.loads(result.content[0].text) == result.structuredContent
            await session.send_ping()
    print(f"python mcp sdk: initialize, {len(names)} tools, call_tool, ping: ok")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
