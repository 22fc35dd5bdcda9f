// The UI in a real browser: Debian's Chromium driven by playwright-core, against a real svc
// server this script starts on a free port with a fresh data directory.
//
//   SVC_BIN=target/release/svc node tests/browser/suite.mjs
//
// Flows: sign in, single sign-on through an OpenID provider (tests/peers/oidc), a CRITICAL result appearing live on the problems page (no reload, announced),
// one inbox with an event's alert (search, keys), a live refresh that leaves a touched control alone,
// acknowledge from the row, silence from an alert, the on-call page, the service worker the
// account page registers, a comment on an object, a service's page and its graphs (ranges, the value under a click
// or a tap), the
// same shift with JavaScript off (the paging trail, a comment, a silence extended, the tactical
// overview), a 390x844 phone viewport without horizontal scrolling on
// every page, and axe-core on every page in the light and the dark theme (no serious or critical violation), and a
// public status page (no script, a phone, axe, subscribing with JavaScript off). A failing flow
// leaves a screenshot and the page's HTML in SVC_ARTIFACTS (default target/browser-artifacts).
// With SVC_SCREENSHOTS=DIR it also keeps pictures of the main pages there (docs/img for the
// README).

import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { createRequire } from "node:module";
import { PASSWORD, address, api, launch, result, seed, signIn, sleep, startProvider, startServer } from "./common.mjs";

const require = createRequire(import.meta.url);
const AXE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
const ARTIFACTS = resolve(process.env.SVC_ARTIFACTS || "target/browser-artifacts");
const SCREENSHOTS = process.env.SVC_SCREENSHOTS ? resolve(process.env.SVC_SCREENSHOTS) : null;

async function picture(page, name) {
  if (!SCREENSHOTS) return;
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`) });
}

/// axe-core on the page as it is: the serious and critical violations.
async function axe(page) {
  await page.addScriptTag({ content: AXE });
  const found = await page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ["violations"] });
    return r.violations
      .filter((v) => v.impact === "serious" || v.impact === "critical")
      .map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(" ")).slice(0, 3).join(", ")}`);
  });
  return found;
}

const results = [];
let current = null;

async function flow(name, page, body) {
  const started = Date.now();
  current = name;
  try {
    await body();
    results.push({ name, ok: true, ms: Date.now() - started });
    console.log(`ok   ${name} (${Date.now() - started} ms)`);
  } catch (e) {
    results.push({ name, ok: false, ms: Date.now() - started, error: e });
    console.log(`FAIL ${name}: ${e.stack || e}`);
    mkdirSync(ARTIFACTS, { recursive: true });
    const file = name.replace(/[^a-z0-9]+/gi, "-").toLowerCase();
    try {
      await page.screenshot({ path: join(ARTIFACTS, `${file}.png`), fullPage: true });
      writeFileSync(join(ARTIFACTS, `${file}.html`), await page.content());
    } catch {}
  }
}

function assert(cond, what) {
  if (!cond) throw new Error(what);
}

const ADMIN_PAGES = ["/users", "/tokens", "/audit", "/config", "/config/alert-rules", "/config/alert-rules/critical", "/dashboards/new", "/account"];
const PAGES = ["/", "/?group=site&sort=newest", "/alerts?group=severity&sort=name", "/objects?group=site&sort=severity", "/me", "/dashboards", "/tactical", "/tactical?kiosk=1", "/slos", "/alerts", "/incidents", "/objects", "/oncall", "/events", "/silences", "/downtimes", "/approvals", "/silences/new", "/sites", "/account", "/oncall/primary/calendar", "/downtimes/new"];

async function main() {
  // The server signs people in through an OpenID provider too: sofia's group "noc" is a role.
  const at = await address();
  const idp = await startProvider(at.base, { sofia: { email: "sofia@example.org", name: "Sofia", groups: ["noc"] } });
  const srv = await startServer(at, `baseUrl: ${at.base}\noidc:\n  issuer: ${idp.issuer}\n  clientId: svc\n  clientSecret: ${idp.secret}\n`);
  let browser;
  try {
    await seed(srv);
    await api(srv, "POST", "/api/v1/roles", { name: "noc", permissions: ["objects:read", "alerts:read", "alerts:ack"], idpGroups: ["noc"] });
    await result(srv, "fan", "CRITICAL");
    browser = await launch();

    // axe-core is injected as an inline script, which the pages' CSP forbids.
    const desktop = await browser.newContext({ viewport: { width: 1280, height: 800 }, bypassCSP: true });
    const page = await desktop.newPage();
    const base = srv.base;

    await flow("sign in", page, async () => {
      await signIn(page, base);
      assert((await page.title()).includes("Problems"), `title: ${await page.title()}`);
    });

    await flow("single sign-on through the OpenID provider", page, async () => {
      const sso = await desktop.browser().newContext();
      const tab = await sso.newPage();
      try {
        await tab.goto(`${base}/login`);
        await Promise.all([tab.waitForURL(/\/interaction\//), tab.click("text=Sign in with 127.0.0.1")]);
        await tab.fill("input[name=login]", "sofia");
        await tab.fill("input[name=password]", "anything");
        await Promise.all([tab.waitForURL(`${base}/`), tab.click("button[type=submit]")]);
        assert((await tab.title()).includes("Problems"), `title: ${await tab.title()}`);
        const sofia = (await api(srv, "GET", "/api/v1/users")).items.find((u) => u.email === "sofia@example.org");
        assert(sofia && !sofia.local && sofia.roles.join() === "noc", `account: ${JSON.stringify(sofia)}`);
      } finally {
        await sso.close();
      }
    });

    await flow("a CRITICAL result appears live on the problems page", page, async () => {
      await page.goto(`${base}/`);
      await page.evaluate(() => (window.__notReloaded = true));
      await result(srv, "disk", "CRITICAL");
      await page.waitForSelector("text=edge / disk", { timeout: 10000 });
      assert(await page.evaluate(() => window.__notReloaded === true), "the page was reloaded instead of updated");
      await page.waitForFunction(() => document.title.startsWith("(2)"), null, { timeout: 10000 });
      await page.locator("li", { hasText: "edge / disk" }).getByRole("button", { name: /Acknowledge/ }).waitFor({ timeout: 10000 });
      await page.waitForFunction(() => [...document.querySelectorAll("[aria-live=polite]")].some((e) => /1 new/.test(e.textContent)), null, { timeout: 10000 });
      await picture(page, "problems");
    });

    await flow("acknowledge from the row", page, async () => {
      const row = page.locator("li", { hasText: "edge / disk" });
      await row.getByRole("button", { name: /Acknowledge/ }).waitFor({ timeout: 10000 });
      await Promise.all([page.waitForURL(/did=ack/), row.getByRole("button", { name: /Acknowledge/ }).click()]);
      assert(await page.isVisible("text=Acknowledged."), "no notice");
      assert(!(await page.isVisible("text=edge / disk")), "the acknowledged problem is still listed as unhandled");
    });

    await flow("silence from an alert", page, async () => {
      await result(srv, "load", "CRITICAL");
      await page.goto(`${base}/alerts`);
      await page.click("text=load is CRITICAL");
      await picture(page, "alert");
      await page.click("text=Silence alerts like this");
      assert((await page.inputValue("#textRegex")) === "^load is CRITICAL$", await page.inputValue("#textRegex"));
      await page.fill("#comment", "load test tonight");
      await Promise.all([page.waitForURL(/\/silences\?did=silence/), page.click("text=Create silence")]);
      assert(await page.isVisible("text=load test tonight"), "the silence is not listed");
      assert(await page.isVisible("text=matches 1 active alert now"), "the silence matches nothing");
    });

    await flow("acknowledge with options from the alert page", page, async () => {
      await page.goto(`${base}/alerts`);
      await page.click("text=load is CRITICAL");
      await page.selectOption("select[name=expires_in]", "4h");
      await page.check("input[name=loose]");
      await Promise.all([page.waitForURL(/did=ack/), page.click("form[action$='/ack'] button")]);
      const terms = await page.locator("dt:text-is('Acknowledgement') + dd").textContent();
      assert(/cleared by the next change, lapses in [34]h/.test(terms), terms);
    });

    await flow("one inbox: an event's alert among the problems, searched and acknowledged by keys", page, async () => {
      await api(srv, "POST", "/api/v1/event-sources", { name: "scada", type: "webhook", authMode: "none" });
      await api(srv, "POST", "/api/v1/alert-rules", {
        name: "scada", match: "event.type == 'ingress' && event.source == 'scada'", severity: "critical",
        title: "{{ .event.summary }}", dedupKey: "{{ .event.dedupKey }}",
      });
      const res = await fetch(`${base}/api/v1/ingest/scada`, {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ summary: "pump station 3 pressure low", severity: "critical", dedupKey: "ps3" }),
      });
      assert(res.ok, `ingest: ${res.status}`);
      await page.goto(`${base}/`);
      await page.waitForSelector("text=pump station 3 pressure low", { timeout: 10000 });
      await page.keyboard.press("/");
      assert(await page.evaluate(() => document.activeElement.id === "q"), "/ does not focus the search");
      await page.keyboard.type("pressure");
      await Promise.all([page.waitForURL(/q=pressure/), page.keyboard.press("Enter")]);
      assert((await page.locator("main ul.list > li").count()) === 1, "the search did not narrow the list");
      await page.locator("h1").click();
      await page.keyboard.press("j");
      assert(await page.isVisible("main li.current"), "j does not move to a row");
      await Promise.all([page.waitForURL(/did=ack/), page.keyboard.press("a")]);
      assert(await page.isVisible("text=Acknowledged."), "a did not acknowledge the row");
      await page.keyboard.press("?");
      assert(await page.isVisible("[role=dialog] >> text=acknowledge the row"), "? shows no help");
    });

    await flow("the alerts page sorted and grouped, two alerts selected and shelved together", page, async () => {
      for (const n of [8, 7]) {
        await api(srv, "POST", "/api/v1/alerts", { title: `valve ${n} stuck`, severity: "warning", labels: { site: "south" } });
      }
      await page.goto(`${base}/alerts`);
      await page.fill("#q", "valve");
      await page.selectOption("#sort", "name");
      await page.selectOption("#group", "site");
      await Promise.all([page.waitForURL(/group=site/), page.getByRole("button", { name: "Filter", exact: true }).click()]);
      assert(await page.isVisible("main h2:has-text('south')"), "no group for the site");
      const titles = await page.locator("main ul.list > li span.what > a").allTextContents();
      assert(titles.join() === "valve 7 stuck,valve 8 stuck", `not by title: ${titles}`);
      await page.check("input[aria-label='Select valve 7 stuck']");
      await page.check("input[aria-label='Select valve 8 stuck']");
      await page.selectOption("#bulk-for", "4h");
      await Promise.all([page.waitForURL(/did=shelve-some/), page.click("text=Shelve selected")]);
      assert(await page.isVisible("text=Shelved the selected alerts"), "no notice");
      const open = await api(srv, "GET", "/api/v1/alerts?status=open");
      const shelved = open.items.filter((a) => a.title.startsWith("valve") && a.shelved);
      assert(shelved.length === 2, `shelved: ${shelved.length}`);
    });

    await flow("the events page: the paging trail narrowed by type", page, async () => {
      await page.goto(`${base}/events`);
      await page.selectOption("#types", "ack");
      await Promise.all([page.waitForURL(/types=ack/), page.getByRole("button", { name: "Filter", exact: true }).click()]);
      const lines = await page.locator("main ul.list > li").allTextContents();
      assert(lines.length > 0, "no acknowledgements listed");
      assert(lines.every((l) => /acknowledged by Olga in the UI/.test(l)), `not only acknowledgements: ${lines.join(" | ")}`);
    });

    await flow("a live refresh never changes a control a person touched", page, async () => {
      await api(srv, "POST", "/api/v1/services", { name: "pump", host: "edge", spec: {} });
      await page.goto(`${base}/`);
      await page.selectOption("#bulk-for", "4h");
      await result(srv, "pump", "CRITICAL");
      await sleep(2000);
      assert((await page.inputValue("#bulk-for")) === "4h", "the refresh reset the chosen duration");
      assert(!(await page.isVisible("text=edge / pump")), "the page was swapped under a touched control");
      await page.selectOption("#bulk-for", "1h");
      await page.waitForSelector("text=edge / pump", { timeout: 10000 });
    });

    await flow("the on-call page", page, async () => {
      await page.goto(`${base}/oncall`);
      assert((await page.locator("h1").textContent()) === "On call now", "h1");
      assert(await page.isVisible("text=primary"), "the schedule is not listed");
      assert(await page.isVisible("a[href='tel:+4930123456']"), "no call link for the person on call");
    });

    await flow("a schedule's calendar in the viewer's time zone", page, async () => {
      await page.goto(`${base}/account`);
      await page.fill("#timeZone", "Europe/Berlin");
      await Promise.all([page.waitForURL(/did=look/), page.click("text=Save >> nth=0")]);
      await page.goto(`${base}/oncall`);
      await Promise.all([page.waitForURL(/\/oncall\/primary\/calendar/), page.click("text=Calendar of primary")]);
      assert(await page.isVisible("text=Times in Europe/Berlin"), "the zone is not named");
      assert((await page.locator("tbody tr").count()) === 14, "not 14 days");
      await picture(page, "calendar");
    });

    await flow("a recurring downtime planned from the form", page, async () => {
      await page.goto(`${base}/downtimes/new`);
      await page.fill("#selector", "site=north");
      await page.selectOption("#duration", "720h");
      await page.fill("#weekdays", "saturday");
      await page.fill("#times", "22:00-24:00");
      await page.fill("#comment", "weekly backup");
      await Promise.all([page.waitForURL(/\/downtimes\?did=downtime/), page.click("text=Schedule downtime")]);
      assert(await page.isVisible("text=recurs saturday 22:00-24:00 (Europe/Berlin)"), "the recurrence is not shown");
      assert((await page.locator("li", { hasText: "weekly backup" }).locator("ul li").count()) === 3, "not its next three windows");
    });

    await flow("the account page registers the service worker for Web Push", page, async () => {
      await page.goto(`${base}/account`);
      const scope = await page.evaluate(async () => (await navigator.serviceWorker.ready).scope);
      assert(scope === `${base}/`, `scope: ${scope}`);
      await page.waitForSelector("text=Notifications are off for this device.", { timeout: 10000 });
      assert(await page.isVisible("#push button[data-on]"), "no Turn on button");
    });

    await flow("a service's page with its history", page, async () => {
      await page.goto(`${base}/objects?q=disk`);
      await page.click("text=edge / disk");
      await page.waitForSelector("text=Recent events");
      assert(await page.isVisible("text=state_change"), "no state change in the history");
      assert(await page.isVisible("div.bar[role=img]"), "no state-history bar");
      assert(await page.isVisible("figure svg[role=img]"), "no metric graph");
      assert(await page.isVisible("text=Schedule downtime"), "no downtime control");
      await picture(page, "service");
    });

    await flow("a graph: the current value, thresholds, another range, the value under a click", page, async () => {
      await page.goto(`${base}/objects?q=disk`);
      await page.click("text=edge / disk");
      await page.waitForSelector("figure.graph");
      const caption = await page.textContent("figure.graph figcaption");
      assert(/used (97|40) % now/.test(caption) && /warning at 90, critical at 95/.test(caption), `caption: ${caption}`);
      assert(await page.locator("figure.graph line.crit").count() === 1, "no critical threshold line");
      await page.click("nav.ranges >> text=6h");
      await page.waitForURL(/range=6h/);
      assert(await page.getAttribute("nav.ranges a[aria-current]", "href").then((h) => h.endsWith("range=6h")), "6h not chosen");
      const slice = page.locator("figure.graph rect").last();
      await slice.click({ force: true });
      const shown = await page.textContent("figure.graph output");
      assert(/ · (97|40) %$/.test(shown), `the value under the click: ${shown}`);
    });

    await flow("a comment from an object's page, acting on nothing", page, async () => {
      await page.goto(`${base}/objects?q=disk`);
      await page.click("text=edge / disk");
      await page.fill("textarea[name=text]", "fan replaced, watching it");
      await Promise.all([page.waitForURL(/did=comment/), page.click("text=Add comment")]);
      assert(await page.isVisible("text=Comment added."), "no notice");
      assert(await page.isVisible("text=fan replaced, watching it"), "the comment is not among its events");
    });

    await flow("a wallboard in kiosk mode stays live", page, async () => {
      await page.goto(`${base}/tactical?kiosk=1`);
      assert(!(await page.isVisible("header")), "the wallboard keeps the navigation");
      await api(srv, "POST", "/api/v1/hosts", { name: "tank", labels: { site: "harbour" }, spec: {} });
      await api(srv, "POST", "/api/v1/services", { name: "level", host: "tank", spec: {} });
      await api(srv, "POST", "/api/v1/results", { results: [{ host: "tank", service: "level", state: "CRITICAL", output: "tank level low" }] });
      await page.waitForSelector("main >> text=harbour", { timeout: 15000 });
    });

    await flow("axe-core finds no serious or critical violation on any page", page, async () => {
      const found = [];
      for (const path of PAGES) {
        await page.goto(base + path);
        for (const v of await axe(page)) found.push(`${path}: ${v}`);
      }
      const alertId = (await api(srv, "GET", "/api/v1/alerts?limit=1")).items[0].id;
      const diskId = (await api(srv, "GET", "/api/v1/services?q=disk")).items[0].id;
      const silenceId = (await api(srv, "GET", "/api/v1/silences")).items[0].id;
      for (const path of [`/alerts/${alertId}`, `/objects/${diskId}`, `/objects/${diskId}?range=7d`, `/silences/${silenceId}/edit`, "/login"]) {
        await page.goto(base + path);
        for (const v of await axe(page)) found.push(`${path}: ${v}`);
      }
      // The administrators' pages, as an administrator.
      const admin = await desktop.browser().newContext({ bypassCSP: true });
      const adminPage = await admin.newPage();
      await signIn(adminPage, base, "ada@example.org");
      for (const path of ADMIN_PAGES) {
        await adminPage.goto(base + path);
        for (const v of await axe(adminPage)) found.push(`${path}: ${v}`);
      }
      await admin.close();
      assert(found.length === 0, found.join("\n"));
    });

    await flow("axe-core finds no serious or critical violation in the dark theme either", page, async () => {
      const dark = await browser.newContext({ colorScheme: "dark", bypassCSP: true });
      const night = await dark.newPage();
      await signIn(night, base);
      const found = [];
      const diskId = (await api(srv, "GET", "/api/v1/services?q=disk")).items[0].id;
      for (const path of [...PAGES, `/objects/${diskId}`]) {
        await night.goto(base + path);
        for (const v of await axe(night)) found.push(`${path}: ${v}`);
      }
      await dark.close();
      assert(found.length === 0, found.join("\n"));
    });

    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
    const mobile = await phone.newPage();
    await flow("a 390x844 phone: no horizontal scrolling, 44 px touch targets", mobile, async () => {
      await signIn(mobile, base);
      await picture(mobile, "phone-problems");
      const wide = [];
      const small = [];
      for (const path of PAGES) {
        await mobile.goto(base + path);
        const w = await mobile.evaluate(() => document.documentElement.scrollWidth);
        if (w > 390) wide.push(`${path}: ${w}px`);
        const tiny = await mobile.evaluate(() =>
          [...document.querySelectorAll("main button, main a.button, header a, nav.tabbar a, main ul.list a, main nav a, main select, main input:not([type=hidden]):not([type=checkbox])")]
            .filter((e) => e.getClientRects().length > 0 && e.getBoundingClientRect().height < 44)
            .map((e) => e.outerHTML.slice(0, 60)),
        );
        for (const t of tiny) small.push(`${path}: ${t}`);
      }
      assert(wide.length === 0, `wider than the screen: ${wide.join(", ")}`);
      assert(small.length === 0, `touch targets under 44 px: ${small.join("\n")}`);
    });

    await flow("a phone: the bottom bar reaches the shift, Me the rest", mobile, async () => {
      await mobile.goto(`${base}/`);
      const bar = await mobile.locator("nav.tabbar").boundingBox();
      assert(bar && bar.y + bar.height <= 844 + 1 && bar.y > 700, `the bar is at ${JSON.stringify(bar)}`);
      const oncall = await mobile.locator("nav.tabbar >> text=On call").boundingBox();
      assert(oncall.x >= 0 && oncall.x + oncall.width <= 390, `On call is off screen: ${JSON.stringify(oncall)}`);
      assert(!(await mobile.isVisible("header >> text=Silences")), "the header's strip still shows on a phone");
      await mobile.tap("nav.tabbar >> text=On call");
      await mobile.waitForURL(/\/oncall$/);
      await mobile.tap("nav.tabbar >> text=Me");
      await mobile.waitForURL(/\/me$/);
      assert(await mobile.isVisible("text=Acknowledged by me"), "no alerts of mine");
      assert(await mobile.isVisible("main >> text=Silences"), "no way to the other sections");
      assert(await mobile.isVisible("main >> text=Sign out"), "no way to sign out");
    });

    await flow("a phone: a tap on a graph shows the value under it", mobile, async () => {
      await mobile.goto(`${base}/objects?q=disk`);
      await mobile.tap("text=edge / disk");
      await mobile.waitForSelector("figure.graph");
      const box = await mobile.locator("figure.graph svg").boundingBox();
      assert(box.width <= 390, `the graph is ${box.width}px wide`);
      await mobile.touchscreen.tap(box.x + box.width - 2, box.y + box.height / 2);
      const shown = await mobile.textContent("figure.graph output");
      assert(/ · (97|40) %$/.test(shown), `the value under the tap: ${shown}`);
    });

    await flow("a phone: the objects grouped by site, two selected for a downtime", mobile, async () => {
      await mobile.goto(`${base}/objects`);
      await mobile.selectOption("#group", "site");
      await Promise.all([mobile.waitForURL(/group=site/), mobile.getByRole("button", { name: "Filter", exact: true }).tap()]);
      assert(await mobile.isVisible("main h2:has-text('north')"), "no group for the site");
      await mobile.check("input[aria-label='Select edge / fan']");
      await mobile.check("input[aria-label='Select edge / load']");
      await mobile.fill("#bulk-comment", "fan and load swapped");
      await Promise.all([mobile.waitForURL(/did=downtime-some/), mobile.getByRole("button", { name: "Start downtime" }).tap()]);
      await mobile.goto(`${base}/downtimes`);
      assert((await mobile.locator("li", { hasText: "fan and load swapped" }).count()) === 2, "not one downtime for each");
    });

    await flow("a phone: an alert's paging trail, and a silence planned for tonight", mobile, async () => {
      await mobile.goto(`${base}/alerts?status=acked`);
      await mobile.tap("text=disk is CRITICAL");
      await mobile.waitForSelector("text=/acknowledged by Olga in the UI/");
      await mobile.goto(`${base}/silences/new`);
      const tomorrow = new Date(Date.now() + 86400000).toISOString().slice(0, 10);
      await mobile.fill("#selector", "site=north");
      await mobile.fill("#start", `${tomorrow}T22:00`);
      await mobile.fill("#comment", "switch firmware tonight");
      await Promise.all([mobile.waitForURL(/did=silence/), mobile.getByRole("button", { name: "Create silence" }).tap()]);
      const upcoming = mobile.locator("h2:has-text('Upcoming') + ul li", { hasText: "switch firmware tonight" });
      assert((await upcoming.count()) === 1, "the silence is not upcoming");
    });

    await flow("a phone: an event's alert in the inbox, an alert's story, acknowledged from its object's page", mobile, async () => {
      const res = await fetch(`${base}/api/v1/ingest/scada`, {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ summary: "tank 2 overflow", severity: "critical", dedupKey: "t2" }),
      });
      assert(res.ok, `ingest: ${res.status}`);
      await mobile.goto(`${base}/`);
      await mobile.waitForSelector("main >> text=tank 2 overflow", { timeout: 10000 });
      await api(srv, "POST", "/api/v1/services", { name: "heater", host: "edge", spec: {} });
      await result(srv, "heater", "CRITICAL");
      await mobile.goto(`${base}/alerts?q=heater`);
      for (let i = 0; i < 50 && !(await mobile.isVisible("text=heater is CRITICAL")); i++) {
        await sleep(200);
        await mobile.reload();
      }
      await mobile.tap("text=heater is CRITICAL");
      await mobile.waitForSelector("h2:has-text('Its object now')");
      const opened = await mobile.locator("dt:has-text('Opened') + dd").textContent();
      assert(/ago · \d\d:\d\d/.test(opened), `the time is not readable without hover: ${opened}`);
      await Promise.all([mobile.waitForURL(/\/objects\//), mobile.tap("dt:has-text('Object') + dd a")]);
      await mobile.fill("input[name=comment][id^=comment-]", "heater breaker reset");
      await Promise.all([mobile.waitForURL(/did=ack/), mobile.getByRole("button", { name: "Acknowledge heater is CRITICAL" }).tap()]);
      const acked = await api(srv, "GET", "/api/v1/alerts?status=acked");
      assert(acked.items.some((a) => a.title === "heater is CRITICAL"), "not acknowledged from the object's page");
    });

    await flow("a phone: a new problem arrives live", mobile, async () => {
      await api(srv, "POST", "/api/v1/services", { name: "boiler", host: "edge", spec: {} });
      await mobile.goto(`${base}/`);
      await result(srv, "boiler", "CRITICAL");
      await mobile.waitForSelector("main >> text=edge / boiler");
    });

    const noScript = await browser.newContext({ javaScriptEnabled: false });
    const plain = await noScript.newPage();
    await flow("the same shift with JavaScript off", plain, async () => {
      await signIn(plain, base);
      await result(srv, "swap", "CRITICAL");
      const row = plain.locator("li", { hasText: "edge / swap" });
      for (let i = 0; i < 50; i++) {
        await plain.goto(`${base}/`);
        if (await row.getByRole("button", { name: /Acknowledge/ }).isVisible()) break;
        await sleep(200);
      }
      await Promise.all([plain.waitForURL(/did=ack/), row.getByRole("button", { name: /Acknowledge/ }).click()]);
      assert(await plain.isVisible("text=Acknowledged."), "no notice without JavaScript");
      await plain.goto(`${base}/silences`);
      assert(await plain.isVisible("text=load test tonight"), "silences without JavaScript");
    });

    await flow("JavaScript off: the paging trail, a comment, a silence extended, the tactical overview", plain, async () => {
      await plain.goto(`${base}/alerts?status=acked`);
      await plain.click("text=swap is CRITICAL");
      assert(await plain.isVisible("text=/acknowledged by Olga in the UI/"), "who acknowledged and how");
      await plain.fill("textarea[name=text]", "checked the swap file, fine");
      await Promise.all([plain.waitForURL(/did=comment/), plain.click("text=Add comment")]);
      assert(await plain.isVisible("text=by Olga: checked the swap file, fine"), "the comment is not in the timeline");
      await plain.goto(`${base}/silences`);
      const row = plain.locator("li", { hasText: "load test tonight" });
      await row.locator("select[name=by]").selectOption("4h");
      await Promise.all([plain.waitForURL(/did=extend/), row.getByRole("button", { name: /^Extend/ }).click()]);
      assert(await plain.isVisible("text=Extended."), "no notice");
      await plain.goto(`${base}/tactical`);
      assert(await plain.isVisible("h2#hosts"), "no tactical overview");
      await plain.click("text=Full screen");
      assert(!(await plain.isVisible("header")), "the wallboard keeps the navigation");
    });

    await flow("JavaScript off: select all and shelve together, the objects sorted, a downtime's recurrence edited", plain, async () => {
      await api(srv, "POST", "/api/v1/alerts", { title: "valve 9 stuck", severity: "warning", labels: { site: "south" } });
      await plain.goto(`${base}/?q=valve`);
      await Promise.all([plain.waitForURL(/select=all/), plain.click("text=Select all")]);
      assert(await plain.isChecked("input[aria-label='Select valve 9 stuck']"), "select all ticks nothing");
      await Promise.all([plain.waitForURL(/did=shelve-some/), plain.click("text=Shelve selected")]);
      const open = await api(srv, "GET", "/api/v1/alerts?status=open");
      assert(open.items.find((a) => a.title === "valve 9 stuck").shelved, "valve 9 is not shelved");
      await plain.goto(`${base}/objects`);
      await plain.selectOption("#sort", "severity");
      await Promise.all([plain.waitForURL(/sort=severity/), plain.getByRole("button", { name: "Filter", exact: true }).click()]);
      const first = await plain.locator("main ul.list > li").first().textContent();
      assert(/CRITICAL/.test(first), `not worst first: ${first}`);
      await plain.goto(`${base}/downtimes`);
      await plain.click("a[aria-label='Edit weekly backup']");
      await plain.fill("#weekdays", "sunday");
      await Promise.all([plain.waitForURL(/did=downtime-saved/), plain.getByRole("button", { name: "Save" }).click()]);
      assert(await plain.isVisible("text=recurs sunday 22:00-24:00 (Europe/Berlin)"), "the new recurrence is not shown");
    });

    const noScriptPhone = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 390, height: 844 } });
    const small = await noScriptPhone.newPage();
    await flow("JavaScript off on a phone: the bottom bar, an alert's story and times, a graph's other range", small, async () => {
      await signIn(small, base);
      await Promise.all([small.waitForURL(/\/oncall$/), small.click("nav.tabbar >> text=On call")]);
      await small.goto(`${base}/alerts?status=acked`);
      await small.click("text=disk is CRITICAL");
      assert(await small.isVisible("h2:has-text('Its object now')"), "no object on the alert's page");
      const opened = await small.locator("dt:has-text('Opened') + dd").textContent();
      assert(/ · \d\d:\d\d/.test(opened), `no wall clock beside the distance: ${opened}`);
      await small.click("dt:has-text('Object') + dd a");
      await Promise.all([small.waitForURL(/range=7d/), small.click("a:text-is('7d')")]);
      assert(await small.isVisible("figure.graph"), "no graph over 7 days");
    });

    await flow("a status page: no script, a phone, axe in both themes, a subscription without JavaScript", page, async () => {
      await api(srv, "POST", "/api/v1/channels", { name: "status-mail", type: "email", config: { host: "127.0.0.1", port: "9", tls: "none", from: "status@example.org" } });
      await api(srv, "POST", "/api/v1/status-pages", {
        name: "plant", title: "Plant status", description: "The north site's services", emailChannel: "status-mail",
        components: [{ name: "Gateway", object: "edge" }, { name: "Cooling", object: "edge/fan", description: "Fans and pumps" }],
      });
      const incident = await api(srv, "POST", "/api/v1/incidents", { title: "Cooling degraded" });
      await api(srv, "POST", `/api/v1/incidents/${incident.id}/status-updates`, { status: "identified", message: "A fan failed; a spare is on its way.", pages: ["plant"], components: ["Cooling"] });
      const html = await (await fetch(`${base}/status/plant`)).text();
      assert(html.length < 40 * 1024, `${html.length} bytes`);
      assert(!/<script/i.test(html), "a script on the status page");
      const found = [];
      for (const scheme of ["light", "dark"]) {
        const ctx = await browser.newContext({ colorScheme: scheme, bypassCSP: true });
        const tab = await ctx.newPage();
        await tab.goto(`${base}/status/plant`);
        for (const v of await axe(tab)) found.push(`${scheme}: ${v}`);
        await ctx.close();
      }
      assert(found.length === 0, found.join("\n"));
      const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
      const small = await phone.newPage();
      await small.goto(`${base}/status/plant`);
      await picture(small, "phone-status-page");
      const w = await small.evaluate(() => document.documentElement.scrollWidth);
      await phone.close();
      assert(w <= 390, `the status page scrolls sideways on a phone: ${w}px`);
      const ctx = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 390, height: 844 } });
      const tab = await ctx.newPage();
      try {
        await tab.goto(`${base}/status/plant`);
        assert(await tab.isVisible("text=A fan failed; a spare is on its way."), "the incident's update is not shown");
        assert(await tab.isVisible("text=Active incidents"), "no active incident");
        assert((await tab.locator("svg[role=img]").count()) === 2, "no availability bars");
        await tab.fill("input[name=email]", "neighbour@example.org");
        await Promise.all([tab.waitForURL(/\/status\/plant\/subscribe$/), tab.click("button:has-text('Subscribe')")]);
        assert(await tab.isVisible("h1:has-text('Check your e-mail')"), "the subscription is not acknowledged");
      } finally {
        await ctx.close();
      }
    });

    await flow("the admin's mends: disabling asks first, Check now only where a check runs", page, async () => {
      await api(srv, "POST", "/api/v1/users", { email: "temp@example.org", name: "Temp", roles: ["viewer"], password: PASSWORD });
      const admin = await (await browser.newContext()).newPage();
      await signIn(admin, base, "ada@example.org");
      await admin.goto(`${base}/users`);
      const row = admin.locator("li", { hasText: "Temp" });
      await row.getByRole("button", { name: /Disable/ }).click();
      assert(admin.url().endsWith("/users"), `disabled without asking: ${admin.url()}`);
      await row.locator("input[name=confirm]").check();
      await Promise.all([admin.waitForURL(/did=disable/), row.getByRole("button", { name: /Disable/ }).click()]);
      const diskId = (await api(srv, "GET", "/api/v1/services?q=disk")).items[0].id;
      await admin.goto(`${base}/objects/${diskId}`);
      assert(await admin.isVisible("text=No check runs here: it takes passive results only."), "Check now on a passive object");
      assert(!(await admin.isVisible("button:has-text('Check now')")), "a Check now that runs nothing");
      const icon = await fetch(`${base}/favicon.ico`);
      assert(icon.ok, `favicon: ${icon.status}`);
      await admin.context().close();
    });
  } finally {
    if (browser) await browser.close();
    srv.child.kill("SIGTERM");
    idp.child.kill("SIGTERM");
  }
  const failed = results.filter((r) => !r.ok);
  console.log(`\n${results.length - failed.length} of ${results.length} flows passed`);
  if (failed.length) {
    console.log(`screenshots and pages of the failures: ${ARTIFACTS}`);
    console.log(`server log:\n${srv.log.join("").split("\n").slice(-40).join("\n")}`);
    process.exit(1);
  }
}

main().catch((e) => {
  console.error(e.stack || e);
  process.exit(1);
});
