// Lifeline browser glue. Loaded with `defer` after htmx.min.js, so it runs
// before htmx processes the page.
//
// 1. Response handling: 422 responses ARE swapped (forms re-render with their
//    field errors); every other 4xx/5xx is not swapped and shows a toast with
//    the response's text instead.
// 2. (Times are rendered by the server in the user's language and time zone,
//    with UTC in the title.)
// 3. History-cache misses are fetched as ordinary (non-HX-Request) requests,
//    so handlers can answer every HX-Request with a fragment.
// 4. Self-refreshing regions marked data-preserve-details keep the open/closed
//    state of their <details id=…> across swaps (the execution page polls).
// 5. Keyboard focus survives a swap: the element that had it inside the swapped
//    region (found again by id, else by its path from the region) gets it back,
//    else the region itself; never <body>.
// 6. Filter forms (role=search) leave empty fields out of the URL they push. A search field
//    sends what is typed as it is typed, and nothing again when it is left.
// 7. A "select all" checkbox (data-select-all=NAME) ticks every checkbox NAME on the
//    page; ticking a row of the DLQ list chooses "with the selected items".
// 8. A submit button with data-confirm asks first (the attribute's text); Cancel sends
//    nothing. Closing a dead letter takes that second thought.
// 9. Live lists: an element marked data-live refreshes its list from the address shown
//    (filters included). It skips a turn while the tab is hidden, rows are ticked, more rows
//    were loaded, or the person paused it with its data-live-toggle button (remembered for
//    the tab). A region refreshed by the clock does not swap while a pointer is pressed.
// 10. List keys: "/" focuses the search, "j"/"k" move between rows (their data-row-link),
//    "x" or Space ticks the focused row, Enter opens it, "?" shows the keys (#keys-help). Keys
//    typed into a field are the field's; Escape leaves it. A row's link is its one Tab stop.
// 11. Folded filters (a phone): a data-filters-toggle button opens and closes its filter
//    form (aria-controls) and counts the filters in use as they change ("Filters (2)").
(function () {
  "use strict";
  document.documentElement.classList.add("js"); // CSS folds what only scripts unfold

  if (window.htmx) {
    htmx.config.responseHandling = [
      { code: "204", swap: false },
      { code: "[23]..", swap: true },
      { code: "422", swap: true, error: false },
      { code: "[45]..", swap: false, error: true },
      { code: "...", swap: false }
    ];
    // A history-cache miss reloads the URL; send it as a plain request so the
    // server answers with the full page, not the fragment it serves to htmx.
    htmx.config.historyRestoreAsHxRequest = false;
  }

  // ---------- toasts ----------
  var TOAST_MS = 10000;

  function toastRegion() {
    var el = document.getElementById("toasts");
    if (!el) {
      el = document.createElement("div");
      el.id = "toasts";
      el.className = "toasts";
      el.setAttribute("aria-live", "assertive");
      document.body.appendChild(el);
    }
    return el;
  }

  // showToast adds a dismissible message; an identical visible message is not
  // repeated (a polling region that keeps failing shows one toast).
  function showToast(title, text) {
    var region = toastRegion();
    var key = title + "\n" + text;
    var existing = region.querySelectorAll(".toast");
    for (var i = 0; i < existing.length; i++) {
      if (existing[i].dataset.key === key) return;
    }
    var t = document.createElement("div");
    t.className = "toast";
    t.setAttribute("role", "alert");
    t.setAttribute("data-testid", "toast");
    t.dataset.key = key;
    var body = document.createElement("p");
    var strong = document.createElement("strong");
    strong.textContent = title; // textContent only: never HTML from a response
    body.appendChild(strong);
    if (text) body.appendChild(document.createTextNode(text));
    var close = document.createElement("button");
    close.type = "button";
    close.setAttribute("aria-label", msg("Dismiss", "Dismiss"));
    close.textContent = "×";
    close.addEventListener("click", function () { t.remove(); });
    t.appendChild(body);
    t.appendChild(close);
    region.appendChild(t);
    setTimeout(function () { t.remove(); }, TOAST_MS);
  }

  // msg returns a message the page rendered in the user's language (data-msg-* on the
  // toast region), else the English fallback; "%s" is replaced with arg.
  function msg(key, fallback, arg) {
    var region = document.getElementById("toasts");
    var m = (region && region.dataset["msg" + key]) || fallback;
    return arg === undefined ? m : m.replace("%s", arg);
  }

  // responseText turns an error response into a short plain-text message.
  // HTML error pages are parsed (not inserted) and their message is taken.
  function responseText(xhr) {
    var raw = (xhr && xhr.responseText) || "";
    var type = (xhr && xhr.getResponseHeader && xhr.getResponseHeader("Content-Type")) || "";
    var text = raw;
    if (/html/i.test(type) || /^\s*</.test(raw)) {
      try {
        var doc = new DOMParser().parseFromString(raw, "text/html");
        var el = doc.querySelector("[data-testid=error-message]") ||
          doc.querySelector("main") || doc.body;
        text = el ? el.textContent : "";
      } catch (e) {
        text = "";
      }
    } else if (/json/i.test(type)) {
      try {
        var j = JSON.parse(raw);
        text = j.message || j.error || raw;
      } catch (e) { /* keep raw */ }
    }
    text = String(text).replace(/\s+/g, " ").trim();
    if (text.length > 240) text = text.slice(0, 237) + "…";
    return text;
  }

  document.addEventListener("htmx:responseError", function (evt) {
    var xhr = evt.detail.xhr;
    var status = xhr ? xhr.status : 0;
    var title = msg("Error", "Something went wrong (%s)…", String(status));
    if (status === 403) title = msg("Forbidden", "Not allowed (403)…");
    if (status === 404) title = msg("Notfound", "Not found (404)…");
    if (status === 401) title = msg("Unauthorized", "Your session has ended (401)…");
    showToast(title, responseText(xhr));
  });

  document.addEventListener("htmx:sendError", function () {
    showToast(msg("Offline", "Could not reach the server…"),
      msg("OfflineText", "Check your connection; the page will keep trying where it refreshes itself."));
  });

  document.addEventListener("htmx:timeout", function () {
    showToast(msg("Timeout", "The server took too long to answer…"), msg("TimeoutText", "Please try again."));
  });

  // ---------- keep <details> state across self-refresh ----------
  var savedDetails = {};

  // ---------- no refresh under a press ----------
  // A region that refreshes itself by the clock (data-live, or an "every" trigger) skips a
  // swap while a pointer is pressed: a click is a press and a release on the same element,
  // and the rows swapped in between would swallow it. The next refresh brings what it missed.
  // Only the primary button: a right press opens the context menu, which takes the release.
  var pressed = false;
  window.addEventListener("pointerdown", function (e) { if (e.button === 0) pressed = true; }, true);
  window.addEventListener("contextmenu", function () { pressed = false; }, true);
  window.addEventListener("pointerup", function () { pressed = false; }, true);
  window.addEventListener("pointercancel", function () { pressed = false; }, true);
  window.addEventListener("dragend", function () { pressed = false; }, true);
  window.addEventListener("blur", function () { pressed = false; }); // released elsewhere
  document.addEventListener("htmx:beforeSwap", function (evt) {
    var elt = evt.detail.requestConfig && evt.detail.requestConfig.elt;
    if (pressed && elt && (elt.hasAttribute("data-live") || /\bevery\b/.test(elt.getAttribute("hx-trigger") || ""))) {
      evt.detail.shouldSwap = false;
    }
  });

  document.addEventListener("htmx:beforeSwap", function (evt) {
    var target = evt.detail.target;
    if (!target || !target.id || !target.hasAttribute("data-preserve-details")) return;
    var state = {};
    target.querySelectorAll("details[id]").forEach(function (d) { state[d.id] = d.open; });
    savedDetails[target.id] = state;
  });

  function restoreDetails(root) {
    if (!root || !root.id || !savedDetails[root.id]) return;
    var state = savedDetails[root.id];
    delete savedDetails[root.id];
    root.querySelectorAll("details[id]").forEach(function (d) {
      if (Object.prototype.hasOwnProperty.call(state, d.id)) d.open = state[d.id];
    });
  }

  if (window.htmx) {
    htmx.onLoad(restoreDetails); // initial page and every swapped-in element
  }

  // ---------- keep keyboard focus across swaps ----------
  // htmx refocuses an element with an id that is in the new content; the links, summaries
  // and buttons of a refreshed region usually have none, so focus fell to <body> on every
  // live refresh. Before a swap we note where focus is (its id, else the nearest ancestor
  // with an id and the path from there); after it settles, if focus was lost, we put it on
  // the same place in the new content, else on that ancestor.
  var savedFocus = null;

  // pathFrom is the list of child positions from root down to el.
  function pathFrom(root, el) {
    var path = [];
    while (el && el !== root) {
      var parent = el.parentElement;
      if (!parent) return null;
      path.unshift(Array.prototype.indexOf.call(parent.children, el));
      el = parent;
    }
    return el === root ? path : null;
  }

  function follow(root, path) {
    var el = root;
    for (var i = 0; el && i < path.length; i++) el = el.children[path[i]];
    return el || null;
  }

  function focusLost() {
    var a = document.activeElement;
    return !a || a === document.body || !document.contains(a);
  }

  document.addEventListener("htmx:beforeSwap", function (evt) {
    var active = document.activeElement;
    savedFocus = null;
    if (!evt.detail.shouldSwap || !active || active === document.body) return;
    var region = active.id ? active : active.parentElement && active.parentElement.closest("[id]");
    if (!region || region === document.body) return;
    savedFocus = { id: active.id, region: region.id, path: pathFrom(region, active), tag: active.tagName };
  });

  document.addEventListener("htmx:afterSettle", function () {
    var f = savedFocus;
    if (!f || !focusLost()) return;
    savedFocus = null;
    var el = f.id ? document.getElementById(f.id) : null;
    var region = document.getElementById(f.region);
    if (!el && region && f.path) el = follow(region, f.path);
    if (!el || el.tagName !== f.tag) el = region;
    if (!el) return;
    if (el.tabIndex < 0 && !el.hasAttribute("tabindex")) el.setAttribute("tabindex", "-1");
    el.focus({ preventScroll: true });
  });

  // ---------- filter forms: no empty keys in the URL ----------
  // A filter form (role=search) sends, and pushes into the address bar, only the fields
  // that say something: /dlq?status=pending, not /dlq?workflowId=&status=pending&q=.
  document.addEventListener("htmx:configRequest", function (evt) {
    var elt = evt.detail.elt, fd = evt.detail.formData;
    if (!elt || elt.tagName !== "FORM" || elt.getAttribute("role") !== "search" || !fd) return;
    Array.from(new Set(fd.keys())).forEach(function (k) {
      if (fd.getAll(k).every(function (v) { return v === ""; })) fd.delete(k);
    });
  });

  // ---------- select all ----------
  function boxesOf(all) {
    return document.querySelectorAll('input[type=checkbox][name="' + all.getAttribute("data-select-all") + '"]');
  }
  // syncSelectAll shows on each "select all" box whether all, some or none are ticked
  // (rows added by "load more" included).
  function syncSelectAll() {
    document.querySelectorAll("input[data-select-all]").forEach(function (all) {
      var boxes = boxesOf(all), n = 0;
      boxes.forEach(function (b) { if (b.checked) n++; });
      all.checked = boxes.length > 0 && n === boxes.length;
      all.indeterminate = n > 0 && n < boxes.length;
    });
  }
  document.addEventListener("change", function (evt) {
    var t = evt.target;
    if (!t || t.type !== "checkbox") return;
    if (t.hasAttribute("data-select-all")) {
      boxesOf(t).forEach(function (b) { b.checked = t.checked; });
    }
    if (t.getAttribute("form") === "bulk-form" || t.hasAttribute("data-select-all")) {
      var selected = document.querySelector('#bulk-form input[name=scope][value=selected]');
      if (selected && t.checked) selected.checked = true;
    }
    syncSelectAll();
  });
  document.addEventListener("htmx:afterSettle", syncSelectAll);

  // ---------- live lists ----------
  function livePaused(id) { return sessionStorage.getItem("live-paused:" + id) === "1"; }
  function showLive(btn) {
    var paused = livePaused(btn.getAttribute("data-live-toggle"));
    btn.setAttribute("aria-pressed", paused ? "true" : "false");
    btn.classList.toggle("is-paused", paused);
  }
  document.addEventListener("click", function (evt) {
    var btn = evt.target && evt.target.closest && evt.target.closest("[data-live-toggle]");
    if (!btn) return;
    var id = btn.getAttribute("data-live-toggle");
    sessionStorage.setItem("live-paused:" + id, livePaused(id) ? "0" : "1");
    showLive(btn);
  });
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-live-toggle]").forEach(showLive);
  });
  // Rows added by "load more" would be lost to a refresh: mark their table.
  document.addEventListener("htmx:afterSwap", function (evt) {
    var from = evt.detail.requestConfig && evt.detail.requestConfig.elt;
    if (from && from.getAttribute("data-testid") === "load-more" && evt.detail.target) {
      evt.detail.target.setAttribute("data-more-loaded", "");
    }
  });
  document.addEventListener("htmx:configRequest", function (evt) {
    if (evt.detail.elt && evt.detail.elt.hasAttribute("data-live")) {
      evt.detail.path = location.pathname + location.search; // the filters shown now
    }
  });
  // A search field's text is sent as it is typed (its "input" trigger); the "change" its
  // field fires when left would send the same search again, and the rows swapped in under
  // the pointer would swallow the click on the row just found.
  // (A "change" whose text the list does not show yet is sent: it cancelled the typing's
  // pending request, as every trigger of the form clears the form's one delay.)
  document.addEventListener("htmx:confirm", function (evt) {
    var e = evt.detail.triggeringEvent, t = e && e.target;
    if (e && e.type === "change" && t && t.classList && t.classList.contains("filter-q") &&
        t.value === (new URLSearchParams(location.search).get(t.name) || "")) {
      evt.preventDefault();
    }
  });
  document.addEventListener("htmx:beforeRequest", function (evt) {
    var elt = evt.detail.elt;
    if (!elt || !elt.hasAttribute("data-live")) return;
    var target = document.querySelector(elt.getAttribute("hx-target"));
    if (document.hidden || livePaused(elt.id) ||
        document.querySelector('input[name=ids]:checked') ||
        (target && target.querySelector("[data-more-loaded], details[open]"))) {
      // (an opened problem's items stay open: the Problems page waits while one is)
      evt.preventDefault();
    }
  });

  // ---------- list keys ----------
  document.addEventListener("keydown", function (evt) {
    if (evt.defaultPrevented || evt.ctrlKey || evt.metaKey || evt.altKey) return;
    var t = evt.target, tag = t && t.tagName;
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (t && t.isContentEditable)) {
      if (evt.key === "Escape" && t.blur) t.blur();
      return;
    }
    var links = Array.prototype.slice.call(document.querySelectorAll("[data-row-link]"));
    var help = document.getElementById("keys-help");
    switch (evt.key) {
      case "/":
        var q = document.querySelector("input[name=q]");
        if (q) { evt.preventDefault(); q.focus(); q.select(); }
        break;
      case "j":
      case "k":
        if (!links.length) return;
        evt.preventDefault();
        var i = links.indexOf(document.activeElement);
        i = evt.key === "j" ? Math.min(links.length - 1, i + 1) : Math.max(0, i - 1);
        links[i].focus();
        var row = links[i].closest("tr");
        if (row && row.scrollIntoView) row.scrollIntoView({ block: "nearest" });
        break;
      case " ":
      case "x":
        var cur = document.activeElement;
        if (links.indexOf(cur) < 0) return;
        var box = cur.closest("tr") && cur.closest("tr").querySelector("input[type=checkbox]");
        if (box) { evt.preventDefault(); box.click(); }
        break;
      case "?":
        if (help) { evt.preventDefault(); help.hidden = !help.hidden; }
        break;
      case "Escape":
        if (help && !help.hidden) help.hidden = true;
        break;
    }
  });

  // ---------- folded filters ----------
  document.addEventListener("click", function (evt) {
    var btn = evt.target && evt.target.closest && evt.target.closest("[data-filters-toggle]");
    if (!btn) return;
    var form = document.getElementById(btn.getAttribute("aria-controls"));
    if (!form) return;
    var open = !form.classList.contains("is-open");
    form.classList.toggle("is-open", open);
    btn.setAttribute("aria-expanded", open ? "true" : "false");
    if (open) {
      var first = form.querySelector("select, input:not([type=hidden])");
      if (first) first.focus();
    }
  });
  // countFilters shows on the toggle how many of its form's filters are in use.
  function countFilters(form) {
    var btn = document.querySelector('[data-filters-toggle][aria-controls="' + form.id + '"]');
    if (!btn) return;
    var n = 0;
    form.querySelectorAll("select[name], input[name]:not([type=hidden])").forEach(function (f) {
      if (f.value !== "") n++;
    });
    btn.textContent = n > 0 ? btn.getAttribute("data-label-count").replace("%s", String(n)) : btn.getAttribute("data-label-none");
  }
  document.addEventListener("change", function (evt) {
    var form = evt.target && evt.target.form;
    if (form && form.id && form.getAttribute("role") === "search") countFilters(form);
  });
  document.addEventListener("input", function (evt) {
    var form = evt.target && evt.target.form;
    if (form && form.id && form.getAttribute("role") === "search") countFilters(form);
  });

  // ---------- asking first ----------
  document.addEventListener("click", function (evt) {
    var b = evt.target && evt.target.closest && evt.target.closest("button[data-confirm]");
    if (b && !window.confirm(b.getAttribute("data-confirm"))) {
      evt.preventDefault();
      evt.stopPropagation();
    }
  }, true);
})();
