// The problems page over a slow link, measured in Debian's Chromium with its network emulation
// (issue 36: the first load after sign-in at most 40 KB, visible within 1 s at 400 kbit/s and
// 400 ms round trip). 50 CRITICAL services each with an open alert; the page loaded cold (the
// browser's cache off: HTML, stylesheet and live module all fetched) and as it is right after
// signing in (the stylesheet cached by the sign-in page); bytes as they crossed the wire
// (compressed where the server compressed them), the time from navigation to the first
// contentful paint and to the load event. Then as an operator meets it (issue 71): from the tap
// on "Sign in" on the sign-in page (the form's POST, its 302 to `/`, the page, the live module)
// to the problems' first paint, and the delay until a new CRITICAL result's row appears on the
// open page. Prints figures; asserts nothing.
//
//   SVC_BIN=target/release/svc node tests/browser/weight.mjs

import { PASSWORD, api, launch, result, seed, signIn, startServer } from "./common.mjs";

const LINKS = [
  { name: "400 kbit/s, 400 ms RTT", kbps: 400, rtt: 400 },
  { name: "GPRS-like, 80 kbit/s, 700 ms RTT", kbps: 80, rtt: 700 },
];
const RUNS = 5;

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/// `link`'s speed and round trip on `page` (its cache off when `cold`); counts the bytes that
/// cross, the event stream's left out.
async function emulate(page, link, cold = false) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Network.enable");
  await cdp.send("Network.setCacheDisabled", { cacheDisabled: cold });
  await cdp.send("Network.emulateNetworkConditions", {
    offline: false,
    latency: link.rtt,
    downloadThroughput: (link.kbps * 1000) / 8,
    uploadThroughput: (link.kbps * 1000) / 8,
  });
  const streams = new Set();
  const counted = { bytes: 0 };
  cdp.on("Network.responseReceived", (e) => {
    if (e.response.mimeType === "text/event-stream") streams.add(e.requestId);
  });
  cdp.on("Network.loadingFinished", (e) => {
    if (!streams.has(e.requestId)) counted.bytes += e.encodedDataLength;
  });
  return counted;
}

async function measure(context, base, link, cold) {
  const page = await context.newPage();
  const counted = await emulate(page, link, cold);
  await page.goto(`${base}/`, { waitUntil: "load" });
  // The paint entry can be reported a moment after the load event.
  const timing = await page.evaluate(
    () =>
      new Promise((done) => {
        const load = performance.getEntriesByType("navigation")[0].loadEventEnd;
        new PerformanceObserver((list) => {
          const fcp = list.getEntries().find((e) => e.name === "first-contentful-paint");
          if (fcp) done({ fcp: fcp.startTime, load });
        }).observe({ type: "paint", buffered: true });
      }),
  );
  await page.close();
  return { bytes: counted.bytes, ...timing };
}

/// From the tap on "Sign in" to the problems' first paint: the sign-in POST and its redirect are
/// one navigation, so the problems page's paint time counts from the tap. Bytes from the tap
/// on, the live module included.
async function fromTheTap(browser, base, link) {
  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true });
  const page = await context.newPage();
  const counted = await emulate(page, link);
  await page.goto(`${base}/login`, { waitUntil: "load" });
  await page.fill("#email", "olga@example.org");
  await page.fill("#password", PASSWORD);
  counted.bytes = 0;
  await Promise.all([page.waitForURL(`${base}/`, { waitUntil: "load" }), page.click("button[type=submit]")]);
  const fcp = await page.evaluate(
    () =>
      new Promise((done) => {
        new PerformanceObserver((list) => {
          const paint = list.getEntries().find((e) => e.name === "first-contentful-paint");
          if (paint) done(paint.startTime);
        }).observe({ type: "paint", buffered: true });
      }),
  );
  const load = await page.evaluate(() => performance.getEntriesByType("navigation")[0].loadEventEnd);
  await page.waitForTimeout(200);
  const bytes = counted.bytes;
  await context.close();
  return { fcp, load, bytes };
}

/// The delay from a new CRITICAL result to its row on an open problems page over `link`.
async function liveDelay(context, srv, link, n) {
  const page = await context.newPage();
  await emulate(page, link);
  await page.goto(`${srv.base}/`, { waitUntil: "load" });
  // The event stream is open once the page has asked for its version the first time.
  await page.waitForTimeout(2000);
  const name = `late${n}`;
  await api(srv, "POST", "/api/v1/services", { name, host: "edge", spec: {} });
  const started = Date.now();
  await result(srv, name, "CRITICAL");
  await page.waitForSelector(`text=edge / ${name}`, { timeout: 30000 });
  const ms = Date.now() - started;
  await page.close();
  return ms;
}

async function main() {
  const srv = await startServer();
  const browser = await launch();
  try {
    await seed(srv);
    const services = [];
    for (let i = 0; i < 46; i++) services.push({ name: `svc${String(i).padStart(2, "0")}`, host: "edge", spec: {} });
    await api(srv, "POST", "/api/v1/objects:batch", { services, mode: "upsert" });
    const names = ["disk", "load", "swap", "fan", ...services.map((s) => s.name)];
    await api(srv, "POST", "/api/v1/results", {
      results: names.map((service) => ({ host: "edge", service, state: "CRITICAL", output: `${service} is CRITICAL: 97 % used` })),
    });
    for (let i = 0; i < 100; i++) {
      const open = await api(srv, "GET", "/api/v1/alerts?status=open&limit=100");
      if (open.items.length >= 50) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const context = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true });
    const page = await context.newPage();
    await signIn(page, srv.base);
    const html = await (await page.request.get(`${srv.base}/`)).text();
    console.log(`svc problems page, 50 CRITICAL services with open alerts, phone viewport, ${RUNS} loads each (median):`);
    console.log(`  HTML ${html.length} bytes uncompressed`);
    for (const link of LINKS) {
      for (const cold of [true, false]) {
        const runs = [];
        for (let i = 0; i < RUNS; i++) runs.push(await measure(context, srv.base, link, cold));
        const kb = median(runs.map((r) => r.bytes)) / 1024;
        const fcp = median(runs.map((r) => r.fcp)) / 1000;
        const load = median(runs.map((r) => r.load)) / 1000;
        const how = cold ? "cold (no cache)" : "after sign-in ";
        console.log(`  ${link.name}, ${how}: ${kb.toFixed(1)} KB on the wire, visible (first contentful paint) ${fcp.toFixed(2)} s, loaded ${load.toFixed(2)} s`);
      }
    }
    console.log(`from the tap on "Sign in" (sign-in POST, redirect, problems page, live module), ${RUNS} runs each (median):`);
    for (const link of LINKS) {
      const runs = [];
      for (let i = 0; i < RUNS; i++) runs.push(await fromTheTap(browser, srv.base, link));
      const kb = median(runs.map((r) => r.bytes)) / 1024;
      const fcp = median(runs.map((r) => r.fcp)) / 1000;
      const load = median(runs.map((r) => r.load)) / 1000;
      console.log(`  ${link.name}: ${kb.toFixed(1)} KB on the wire, problems visible ${fcp.toFixed(2)} s after the tap, loaded ${load.toFixed(2)} s`);
    }
    const delays = [];
    for (let i = 0; i < RUNS; i++) delays.push(await liveDelay(context, srv, LINKS[0], i));
    console.log(`a new CRITICAL result on the open page at ${LINKS[0].name}: ${(median(delays) / 1000).toFixed(2)} s (median of ${RUNS}; the 400 ms the page waits for more events included)`);
  } finally {
    await browser.close();
    srv.child.kill("SIGTERM");
  }
}

main().catch((e) => {
  console.error(e.stack || e);
  process.exit(1);
});
