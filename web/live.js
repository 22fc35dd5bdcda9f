// Live pages: a <main data-live="type type…"> listens to the event stream for those event
// types and, a moment after the last one, asks for the same page again naming the version it
// shows (If-None-Match: data-version); unchanged, the answer is an empty 304; changed, its
// <main> and title are swapped in, rows that are new or changed (li[data-key]) are marked for a
// moment and announced to screen readers. Nothing is swapped while a control inside <main> has
// the focus or differs from how the page drew it (text typed, a box ticked, another option
// chosen), so a refresh never changes what a person touched. Without JavaScript the page is
// the same, only not live. Keys on a desktop: / search, j and k move, a acknowledges, ? help.
// A tap on a graph shows the value under it.
(function () {
  "use strict";
  var main = document.querySelector("main[data-live]");
  var news = document.createElement("div");
  news.className = "visually-hidden";
  news.setAttribute("aria-live", "polite");
  document.body.appendChild(news);
  keys();
  values();
  if (!main || !window.EventSource || !window.fetch || !window.DOMParser) return;
  var types = main.getAttribute("data-live").split(/\s+/).filter(Boolean);
  var timer = null, busy = false, again = false;

  function touched() {
    var a = document.activeElement;
    if (a && main.contains(a) && /^(INPUT|TEXTAREA|SELECT)$/.test(a.tagName)) return true;
    var fields = main.querySelectorAll("input,textarea,select");
    for (var i = 0; i < fields.length; i++) {
      var f = fields[i];
      if (f.tagName === "SELECT") {
        for (var j = 0; j < f.options.length; j++) if (f.options[j].selected !== f.options[j].defaultSelected) return true;
      } else if (f.type === "checkbox" || f.type === "radio") {
        if (f.checked !== f.defaultChecked) return true;
      } else if (f.type !== "hidden" && f.value !== f.defaultValue) {
        return true;
      }
    }
    return false;
  }

  function rows(root) {
    var out = {};
    root.querySelectorAll("li[data-key]").forEach(function (li) { out[li.getAttribute("data-key")] = li.outerHTML; });
    return out;
  }

  function refresh() {
    if (busy) { again = true; return; }
    if (touched()) { schedule(3000); return; }
    busy = true;
    var headers = { Accept: "text/html" };
    var version = main.getAttribute("data-version");
    if (version) headers["If-None-Match"] = '"' + version + '"';
    fetch(location.href, { headers: headers, credentials: "same-origin", redirect: "manual", cache: "no-store" })
      .then(function (r) { return r.status === 200 ? r.text() : null; })
      .then(function (html) {
        if (!html) return;
        var doc = new DOMParser().parseFromString(html, "text/html");
        var next = doc.querySelector("main[data-live]");
        if (!next || touched()) return;
        var before = rows(main), fresh = 0, changed = 0;
        main.innerHTML = next.innerHTML;
        main.setAttribute("data-version", next.getAttribute("data-version") || "");
        document.title = doc.title;
        main.querySelectorAll("li[data-key]").forEach(function (li) {
          var key = li.getAttribute("data-key"), was = before[key];
          delete before[key];
          if (was === li.outerHTML) return;
          if (was === undefined) fresh++; else changed++;
          li.classList.add("fresh");
        });
        var gone = Object.keys(before).length, said = [];
        if (fresh) said.push(fresh + " new");
        if (changed) said.push(changed + " changed");
        if (gone) said.push(gone + " gone");
        if (said.length) news.textContent = said.join(", ") + ".";
        setTimeout(function () {
          main.querySelectorAll("li.fresh").forEach(function (li) { li.classList.remove("fresh"); });
        }, 4000);
      })
      .catch(function () {})
      .then(function () {
        busy = false;
        if (again) { again = false; schedule(300); }
      });
  }

  function schedule(ms) {
    clearTimeout(timer);
    timer = setTimeout(refresh, ms);
  }

  var stream = new EventSource("/api/v1/stream?types=" + encodeURIComponent(types.join(",")));
  types.concat(["resync"]).forEach(function (t) {
    stream.addEventListener(t, function () { schedule(400); });
  });
  // Whatever happened between the page's rendering and the stream's (re)start was not heard:
  // one conditional fetch on each opening catches up (304 when nothing did).
  stream.addEventListener("open", function () { schedule(100); });

  // A tap (or click) on a graph shows the time and value of the sample under it; hovering
  // shows the same as the slice's title.
  function values() {
    document.addEventListener("click", function (e) {
      var slice = e.target.closest && e.target.closest("figure.graph rect");
      if (!slice) return;
      var figure = slice.closest("figure");
      var on = figure.querySelector("rect.on");
      if (on) on.classList.remove("on");
      slice.classList.add("on");
      figure.querySelector("output").textContent = slice.textContent;
    });
  }

  function keys() {
    var help = null;
    document.addEventListener("keydown", function (e) {
      var t = e.target;
      if (e.ctrlKey || e.metaKey || e.altKey || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName) || t.isContentEditable) return;
      var list = Array.prototype.slice.call(document.querySelectorAll("main ul.list > li"));
      var at = list.indexOf(document.querySelector("main li.current"));
      if (e.key === "/") {
        var search = document.querySelector("main input[type=search]");
        if (search) { e.preventDefault(); search.focus(); }
      } else if ((e.key === "j" || e.key === "k") && list.length) {
        var next = list[Math.max(0, Math.min(list.length - 1, at + (e.key === "j" ? 1 : -1)))];
        if (list[at]) list[at].classList.remove("current");
        next.classList.add("current");
        next.tabIndex = -1;
        next.focus();
      } else if (e.key === "a" && list[at]) {
        var ack = list[at].querySelector("form[action$='/ack'] button");
        if (ack) ack.click();
      } else if (e.key === "?") {
        if (!help) {
          help = document.createElement("div");
          help.className = "keys";
          help.setAttribute("role", "dialog");
          help.setAttribute("aria-label", "Keyboard shortcuts");
          help.innerHTML = "<p><kbd>/</kbd> search · <kbd>j</kbd> <kbd>k</kbd> next, previous row · <kbd>a</kbd> acknowledge the row · <kbd>?</kbd> this help</p>";
          document.body.appendChild(help);
        } else {
          help.hidden = !help.hidden;
        }
      } else if (e.key === "Escape" && help) {
        help.hidden = true;
      }
    });
  }
})();
