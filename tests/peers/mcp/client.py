"""Drives svc's /mcp with the official MCP Python SDK (PyPI `mcp`, pinned in
requirements.txt): connects with a bearer token, lists the tools and calls the ones named on
the command line. Prints one JSON document for the test to check.

usage: client.py URL TOKEN [TOOL JSON-ARGUMENTS]...
MCP_MODE: the client's connect mode, "auto" (the default: server/discover, falling back to the
initialize handshake) or "legacy" (the handshake only).
"""

import asyncio
import json
import os
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main(url: str, token: str, calls: list[tuple[str, dict]]) -> dict:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    transport = streamable_http_client(url, http_client=http)
    async with Client(transport, mode=os.environ.get("MCP_MODE", "auto")) as client:
        info = client.server_info
        version = client.protocol_version
        tools = await client.list_tools()
        results = []
        for name, args in calls:
            r = await client.call_tool(name, args)
            results.append({
                "name": name,
                "isError": bool(r.is_error),
                "text": "".join(c.text for c in r.content if getattr(c, "type", "") == "text"),
                "structured": r.structured_content,
            })
    return {
        "protocolVersion": version,
        "serverName": info.name if info else None,
        "serverVersion": info.version if info else None,
        "tools": sorted(t.name for t in tools.tools),
        "results": results,
    }


if __name__ == "__main__":
    url, token, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    calls = [(rest[i], json.loads(rest[i + 1])) for i in range(0, len(rest), 2)]
    print(json.dumps(asyncio.run(main(url, token, calls))))
