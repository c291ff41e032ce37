// An independent MCP client for cmd/acrelay/mcp_ts_test.go: the official
// TypeScript SDK (@modelcontextprotocol/sdk, provisioned by
// scripts/provision_mcp_npm.sh and found through NODE_PATH) spawns
// `acrelay mcp` over stdio, calls its tools and prints what it got as one
// JSON object; the Go test judges it.
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');

async function main() {
  const env = JSON.parse(process.env.ACRELAY_MCP_TEST_ENV);
  const repo = process.env.ACRELAY_MCP_TEST_REPO;
  const transport = new StdioClientTransport({ command: process.env.ACRELAY_BIN, args: ['mcp'], env, stderr: 'pipe' });
  let stderr = '';
  transport.stderr.on('data', (d) => { stderr += d; });
  const client = new Client({ name: 'acrelay-ts-test', version: '0.0.0' });
  await client.connect(transport);
  const out = { server: client.getServerVersion(), capabilities: client.getServerCapabilities() };
  const tools = await client.listTools();
  out.tools = tools.tools.map((t) => ({ name: t.name, type: t.inputSchema.type, description: t.description || '' }));
  out.claim = await client.callTool({ name: 'claim_paths', arguments: { repository_id: repo, paths: ['src/parser/lexer', 'docs'], ttl_seconds: 600 } });
  out.voice = await client.callTool({ name: 'voice', arguments: { repository_id: repo } });
  out.bad = await client.callTool({ name: 'claim_paths', arguments: { repository_id: repo, paths: ['src/../etc'] } });
  out.wrongType = await client.callTool({ name: 'claim_paths', arguments: { repository_id: repo, paths: 'src' } });
  try {
    await client.callTool({ name: 'push_to_main', arguments: {} });
    out.unknown = null;
  } catch (e) {
    out.unknown = { code: e.code, message: e.message };
  }
  await client.close();
  out.stderr = stderr;
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});
