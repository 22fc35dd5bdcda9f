// The account page's "Notifications on this device": registers the service worker, subscribes
// this browser with the instance's key and hands the subscription to the API, or takes it back.
// Without JavaScript, or in a browser without Web Push, the section says so and nothing else.
(function () {
  "use strict";
  var box = document.getElementById("push");
  if (!box) return;
  var state = box.querySelector("[data-state]");
  var on = box.querySelector("button[data-on]");
  var off = box.querySelector("button[data-off]");
  if (!("serviceWorker" in navigator) || !("PushManager" in window) || !window.fetch) {
    state.textContent = "This browser cannot receive Web Push notifications.";
    return;
  }

  function key(b64) {
    var s = b64.replace(/-/g, "+").replace(/_/g, "/");
    var raw = atob(s + "===".slice((s.length + 3) % 4));
    var out = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
    return out;
  }

  function api(method, path, body) {
    return fetch(path, {
      method: method,
      credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body)
    }).then(function (res) {
      if (!res.ok) throw new Error("HTTP " + res.status);
      return res.status === 204 ? null : res.json();
    });
  }

  function show(sub) {
    state.textContent = sub ? "Notifications are on for this device." : "Notifications are off for this device.";
    on.hidden = Boolean(sub);
    off.hidden = !sub;
  }

  function fail(e) {
    state.textContent = "That did not work: " + e.message;
  }

  var ready = navigator.serviceWorker.register("/sw.js", { scope: "/" }).then(function () {
    return navigator.serviceWorker.ready;
  });
  ready.then(function (reg) {
    return reg.pushManager.getSubscription();
  }).then(show, fail);

  on.addEventListener("click", function () {
    Promise.all([ready, api("GET", "/api/v1/push-subscriptions/key")]).then(function (r) {
      return r[0].pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key(r[1].publicKey) });
    }).then(function (sub) {
      var j = sub.toJSON();
      return api("POST", "/api/v1/push-subscriptions", { endpoint: j.endpoint, keys: j.keys }).then(function () {
        show(sub);
      });
    }).catch(fail);
  });

  off.addEventListener("click", function () {
    ready.then(function (reg) {
      return reg.pushManager.getSubscription();
    }).then(function (sub) {
      if (!sub) return show(null);
      return api("DELETE", "/api/v1/push-subscriptions", { endpoint: sub.endpoint }).then(function () {
        return sub.unsubscribe();
      }).then(function () {
        show(null);
      });
    }).catch(fail);
  });
})();
