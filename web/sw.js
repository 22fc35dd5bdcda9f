// The service worker of svc's pages (served at /sw.js, scope /): it shows each Web Push
// message as a notification with an "Acknowledge" action when the message carries the
// alert's ack link, and opens the alert when the notification itself is tapped. It caches
// nothing and handles no requests: the pages stay server-rendered.
"use strict";

self.addEventListener("install", function () {
  self.skipWaiting();
});

self.addEventListener("activate", function (event) {
  event.waitUntil(self.clients.claim());
});

self.addEventListener("push", function (event) {
  var m = {};
  try {
    m = event.data ? event.data.json() : {};
  } catch (e) {
    m = { title: event.data ? event.data.text() : "svc" };
  }
  var options = {
    body: m.body || "",
    tag: m.tag || undefined,
    renotify: Boolean(m.tag),
    requireInteraction: m.severity === "critical",
    data: { url: m.url || "/", ackUrl: m.ackUrl || "" },
    actions: m.ackUrl ? [{ action: "ack", title: "Acknowledge" }] : []
  };
  event.waitUntil(self.registration.showNotification(m.title || "svc", options));
});

self.addEventListener("notificationclick", function (event) {
  var data = event.notification.data || {};
  event.notification.close();
  if (event.action === "ack" && data.ackUrl) {
    // The ack link acts on POST; its answer is a page, which the notification replaces.
    event.waitUntil(
      fetch(data.ackUrl, { method: "POST", credentials: "omit" }).then(function (res) {
        var text = res.ok ? "Acknowledged." : "Not acknowledged: the link has expired or the alert is resolved.";
        return self.registration.showNotification(text, { tag: "ack-" + Date.now() });
      })
    );
    return;
  }
  event.waitUntil(self.clients.openWindow(data.url || "/"));
});
