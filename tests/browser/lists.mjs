// The UI's lists at 10,000 services (issue 36: every list paged and filtered on the server,
// fast at that size): 2,000 hosts of 5 services each, 500 of them CRITICAL with an open alert,
// then each page fetched 20 times as a signed-in browser fetches it (gzip), timed from request
// to the last byte. Prints figures; asserts nothing.
//
//   SVC_BIN=target/x86_64-unknown-linux-musl/release/svc node tests/browser/lists.mjs

import { api, PASSWORD, seed, startServer } from "./common.mjs";
import { gunzipSync } from "node:zlib";
import { get } from "node:http";

/// One GET as a browser sends it, the body as it crossed the wire (still gzipped).
function raw(url, headers) {
  return new Promise((done, fail) => {
    get(url, { headers }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => done({ status: res.statusCode, body: Buffer.concat(chunks), zipped: res.headers["content-encoding"] === "gzip" }));
    }).on("error", fail);
  });
}

const RUNS = 20;
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))];

async function main() {
  const srv = await startServer();
  try {
    await seed(srv);
    for (let batch = 0; batch < 10; batch++) {
      const hosts = [];
      const services = [];
      for (let h = batch * 200; h < (batch + 1) * 200; h++) {
        const host = `host${String(h).padStart(4, "0")}`;
        hosts.push({ name: host, labels: { site: `s${h % 10}` }, spec: {} });
        for (let i = 0; i < 5; i++) services.push({ name: `svc${i}`, host, spec: {} });
      }
      await api(srv, "POST", "/api/v1/objects:batch", { hosts, services, mode: "upsert" });
    }
    const critical = [];
    for (let h = 0; h < 500; h++) critical.push({ host: `host${String(h).padStart(4, "0")}`, service: "svc0", state: "CRITICAL", output: "disk 97 % full" });
    await api(srv, "POST", "/api/v1/results", { results: critical });
    for (let i = 0; i < 200; i++) {
      const open = await api(srv, "GET", "/api/v1/alerts?status=open&limit=1000");
      if (open.items.length >= 500) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const login = await fetch(`${srv.base}/login`, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: `email=olga%40example.org&password=${encodeURIComponent(PASSWORD)}`,
      redirect: "manual",
    });
    const cookie = login.headers.get("set-cookie").split(";")[0];
    const pages = ["/", "/alerts", "/objects", "/objects?q=host1999", "/objects?selector=site%3Ds3", "/events", "/dashboards"];
    console.log(`svc UI lists, 2000 hosts and 10000 services (500 CRITICAL with open alerts), ${RUNS} fetches each, gzip:`);
    for (const path of pages) {
      const ms = [];
      let wire = 0;
      let text = 0;
      for (let i = 0; i < RUNS; i++) {
        const started = performance.now();
        const res = await raw(srv.base + path, { Cookie: cookie, Accept: "text/html", "Accept-Encoding": "gzip" });
        ms.push(performance.now() - started);
        if (res.status !== 200) throw new Error(`${path}: ${res.status}`);
        wire = res.body.length;
        text = res.zipped ? gunzipSync(res.body).length : res.body.length;
      }
      console.log(`  ${path.padEnd(32)} p50 ${pct(ms, 50).toFixed(1)} ms, p99 ${pct(ms, 99).toFixed(1)} ms, ${(wire / 1024).toFixed(1)} KB on the wire (${(text / 1024).toFixed(0)} KB of HTML)`);
    }
  } finally {
    srv.child.kill("SIGTERM");
  }
}

main().catch((e) => {
  console.error(e.stack || e);
  process.exit(1);
});
