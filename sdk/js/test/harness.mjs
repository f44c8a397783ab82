// Spawns the real `citadel` binary on free 127.0.0.1 ports with a fresh
// SQLite file, the repository's game/ scripts and (optionally) WebTransport,
// and stops it at the end. CITADEL_BIN overrides target/debug/citadel.
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync, existsSync } from "node:fs";
import { createServer } from "node:net";
import { createSocket } from "node:dgram";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const repo = fileURLToPath(new URL("../../../", import.meta.url));

function tcpPort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function udpPort() {
  return new Promise((resolve, reject) => {
    const s = createSocket("udp4");
    s.once("error", reject);
    s.bind(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

export async function startNode({ webtransport = false, extra = "" } = {}) {
  const bin = process.env.CITADEL_BIN ?? join(repo, "target/debug/citadel");
  if (!existsSync(bin)) throw new Error(`${bin} not found: build it first (cargo build -p citadel-server)`);
  const dir = mkdtempSync(join(tmpdir(), "citadel-jssdk-"));
  const http = await tcpPort();
  const ws = await tcpPort();
  const wt = webtransport ? await udpPort() : 0;
  const config = `
[server]
node_id = "jssdk-test"
public_addr = "127.0.0.1:${http}"
[http]
bind = "127.0.0.1:${http}"
[logging]
level = "warn"
[transport.websocket]
bind = "127.0.0.1:${ws}"
[transport.webtransport]
enabled = ${webtransport}
bind = "127.0.0.1:${wt || 7353}"
[transport.tls]
data_dir = "${join(dir, "data")}"
[runtime]
scripts_dir = "${join(repo, "game")}"
[database]
url = "sqlite://${join(dir, "db.sqlite")}"
${extra}
`;
  const path = join(dir, "citadel.toml");
  writeFileSync(path, config);
  const child = spawn(bin, ["serve", "--config", path], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d) => {
    if (stderr.length < 65536) stderr += d;
  });
  const exited = new Promise((r) => child.once("exit", r));
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`citadel exited: ${stderr}`);
    try {
      const res = await fetch(`http://127.0.0.1:${http}/health`);
      if (res.ok) break;
    } catch {
      /* not up yet */
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`citadel did not start in 30 s: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    httpUrl: `http://127.0.0.1:${http}`,
    wsUrl: `ws://127.0.0.1:${ws}/`,
    wtPort: wt,
    bin,
    configPath: path,
    get stderr() {
      return stderr;
    },
    async stop() {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
