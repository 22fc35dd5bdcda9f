// Live pages: a <main data-live="type type…"> listens to the event stream for those event
// types and, a moment after the last one, fetches the same page and swaps in its <main> and
// title, so rows appear, change and leave without a reload. Without JavaScript the page is the
// same, only not live. Nothing is swapped while a control inside <main> has the focus or holds
// typed text, so an operator mid-comment does not lose it. The stream is opened once per page
// and closed with it.
(function () {
  "use strict";
  var main = document.querySelector("main[data-live]");
  if (!main || !window.EventSource || !window.fetch || !window.DOMParser) return;
  var types = main.getAttribute("data-live").split(/\s+/).filter(Boolean);
  var timer = null, busy = false, again = false;

  function typing() {
    var a = document.activeElement;
    if (a && main.contains(a) && /^(INPUT|TEXTAREA|SELECT)$/.test(a.tagName)) return true;
    var fields = main.querySelectorAll("input[type=text],textarea");
    for (var i = 0; i < fields.length; i++) if (fields[i].value !== fields[i].defaultValue) return true;
    return main.querySelector("input[type=checkbox]:checked") !== null;
  }

  function refresh() {
    if (busy) { again = true; return; }
    if (typing()) { schedule(3000); return; }
    busy = true;
    fetch(location.href, { headers: { Accept: "text/html" }, credentials: "same-origin", redirect: "manual" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) return;
        var doc = new DOMParser().parseFromString(html, "text/html");
        var next = doc.querySelector("main[data-live]");
        if (!next || typing()) return;
        main.innerHTML = next.innerHTML;
        document.title = doc.title;
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
  // one fetch on each opening catches up.
  stream.addEventListener("open", function () { schedule(100); });
})();
