// What the browser suite and the page-weight benchmark share: a real svc server on a free port
// with a fresh data directory, the API with its bootstrap token, Chromium's launch options, the
// OpenID provider of tests/peers/oidc.

import { spawn, execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

export const BIN = resolve(process.env.SVC_BIN || "target/release/svc");
export const PASSWORD = "a long enough password";

/// Debian's Chromium, headless, kept off the network this machine does not have.
export function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

function freePort() {
  return new Promise((ok) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = s.address().port;
      s.close(() => ok(port));
    });
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/// A free port on 127.0.0.1 and the base URL a server on it has.
export async function address() {
  const port = await freePort();
  return { port, base: `http://127.0.0.1:${port}` };
}

/// An svc server on `at` (from `address()`, a fresh one by default), with `config` (YAML) as
/// its configuration file when given.
export async function startServer(at, config) {
  // In memory where the machine has it: the suite tests pages, and CI runs it beside builds
  // whose writes can hold a commit's fsync for seconds.
  const dir = mkdtempSync(join(existsSync("/dev/shm") ? "/dev/shm" : tmpdir(), "svc-browser-"));
  const data = join(dir, "data");
  mkdirSync(data);
  const token = execFileSync(BIN, ["bootstrap", "--data-dir", data], { encoding: "utf8" }).trim();
  const { port, base } = at || (await address());
  const extra = [];
  if (config) {
    writeFileSync(join(dir, "svc.yaml"), config);
    extra.push("--config", join(dir, "svc.yaml"));
  }
  const log = [];
  const child = spawn(BIN, ["serve", "--data-dir", data, "--listen", `127.0.0.1:${port}`, "--tls", "off", ...extra], {
    env: { ...process.env, SVC_DEFAULT_ADMIN_DISABLED: "1", RUST_LOG: "warn" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout.on("data", (d) => log.push(String(d)));
  child.stderr.on("data", (d) => log.push(String(d)));
  child.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  for (let i = 0; i < 100; i++) {
    try {
      if ((await fetch(`${base}/healthz`)).ok) return { base, token, child, log };
    } catch {}
    await sleep(100);
  }
  throw new Error(`the server did not start:\n${log.join("")}`);
}

export async function api(srv, method, path, body) {
  const res = await fetch(srv.base + path, {
    method,
    headers: { Authorization: `Bearer ${srv.token}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

export async function result(srv, service, state) {
  await api(srv, "POST", "/api/v1/results", {
    results: [{ host: "edge", service, state, output: `${service} is ${state} | used=${state === "OK" ? 40 : 97}%;90;95` }],
  });
}

export async function seed(srv) {
  await api(srv, "POST", "/api/v1/hosts", { name: "edge", labels: { site: "north" }, spec: {} });
  for (const name of ["disk", "load", "swap", "fan"]) {
    await api(srv, "POST", "/api/v1/services", { name, host: "edge", spec: {} });
  }
  await api(srv, "POST", "/api/v1/alert-rules", {
    name: "critical",
    match: "event.type == 'state_change' && event.state == 'CRITICAL'",
    severity: "critical",
    title: "{{ .event.object }} is {{ .event.state }}",
  });
  await api(srv, "POST", "/api/v1/slos", { name: "cooling", target: 99.5, window: "7d", object: "edge/fan" });
  await api(srv, "POST", "/api/v1/contacts", { name: "ada", email: "ada@example.org", phone: "+4930123456" });
  await api(srv, "POST", "/api/v1/schedules", {
    name: "primary",
    timeZone: "UTC",
    layers: [{ name: "week", unit: "weekly", anchor: "2026-01-05T00:00:00Z", participants: ["ada"] }],
  });
  await api(srv, "POST", "/api/v1/users", { email: "olga@example.org", name: "Olga", roles: ["operator"], password: PASSWORD });
  await api(srv, "POST", "/api/v1/users", { email: "ada@example.org", name: "Ada", roles: ["admin"], password: PASSWORD });
}

export async function signIn(page, base, email = "olga@example.org") {
  await page.goto(`${base}/login`);
  await page.fill("#email", email);
  await page.fill("#password", PASSWORD);
  await Promise.all([page.waitForURL(`${base}/`), page.click("button[type=submit]")]);
}


/// The OpenID provider of the SSO tests (tests/peers/oidc, `npm ci` there first) on a free port,
/// with one client `svc` for the server at `base` and `accounts` ({login: {email, name, groups}}).
export async function startProvider(base, accounts) {
  const dir = mkdtempSync(join(tmpdir(), "svc-oidc-"));
  const state = join(dir, "state.json");
  writeFileSync(state, JSON.stringify({
    clients: [{ client_id: "svc", client_secret: "a-client-secret-for-the-browser-suite", redirect_uris: [`${base}/auth/callback`], grant_types: ["authorization_code"], response_types: ["code"] }],
    accounts,
    tamper: null,
  }));
  const { port, base: issuer } = await address();
  const script = resolve(dirname(fileURLToPath(import.meta.url)), "../peers/oidc/provider.mjs");
  const child = spawn(process.execPath, [script, String(port), state], { stdio: ["ignore", "pipe", "pipe"] });
  const log = [];
  child.stdout.on("data", (d) => log.push(String(d)));
  child.stderr.on("data", (d) => log.push(String(d)));
  for (let i = 0; i < 100; i++) {
    try {
      if ((await fetch(`${issuer}/.well-known/openid-configuration`)).ok) return { issuer, child, secret: "a-client-secret-for-the-browser-suite" };
    } catch {}
    await sleep(100);
  }
  throw new Error(`the OpenID provider did not start:\n${log.join("")}`);
}
