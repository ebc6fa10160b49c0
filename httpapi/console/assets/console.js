// Muster console: keeps the page live and the search instant, without
// reloading. It asks /console/api/summary whether anything changed (304
// while nothing did) and then fetches the page's live part again. Without
// JavaScript every page still works: the search is a GET form and the
// actions are a confirmation page with a POST form.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live) { return; }
  var state = document.getElementById("live-state");
  var index = live.getAttribute("data-index");
  var base = live.getAttribute("data-base") || ""; // the server's context path
  var pollMillis = 2000;
  var generation = 0;

  function partialURL() {
    var u = new URL(window.location.href);
    u.searchParams.set("partial", "1");
    return u.toString();
  }

  // refresh replaces the live part with the server's current rendering of
  // this URL; a later call wins over an earlier one still in flight.
  function refresh() {
    var mine = ++generation;
    return fetch(partialURL(), { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        var next = r.headers.get("X-Console-Index");
        return r.text().then(function (html) {
          if (mine !== generation) { return; }
          live.innerHTML = html;
          if (next) { index = next; live.setAttribute("data-index", next); }
          live.setAttribute("data-refreshed", String(mine));
        });
      });
  }

  function setState(ok) {
    if (!state) { return; }
    state.textContent = ok ? "live" : "live (server unreachable)";
    state.className = ok ? "live-state" : "live-state stale";
  }

  function poll() {
    if (document.hidden) { // a tab in the background asks nothing
      window.setTimeout(poll, pollMillis);
      return;
    }
    fetch(base + "/console/api/summary?index=" + encodeURIComponent(index), { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (r.status === 304) { return null; }
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.json().then(function () { return refresh(); });
      })
      .then(function () { setState(true); }, function () { setState(false); })
      .then(function () { window.setTimeout(poll, pollMillis); });
  }
  window.setTimeout(poll, pollMillis);

  // Instant search: the form's fields narrow the list as one types.
  var form = document.getElementById("search");
  if (form) {
    var timer = 0;
    var apply = function () {
      var params = new URLSearchParams();
      new FormData(form).forEach(function (v, k) { if (String(v).trim() !== "") { params.set(k, String(v).trim()); } });
      var qs = params.toString();
      window.history.replaceState(null, "", form.getAttribute("action") + (qs ? "?" + qs : ""));
      refresh().catch(function () { setState(false); });
    };
    form.addEventListener("input", function () {
      window.clearTimeout(timer);
      timer = window.setTimeout(apply, 250);
    });
    form.addEventListener("change", function () {
      window.clearTimeout(timer);
      apply();
    });
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      window.clearTimeout(timer);
      apply();
    });
  }
}());
