// Redrive console behaviour. Progressive enhancement only: every page works
// without it. Loaded from /static, so the CSP needs no inline script.
(function () {
  "use strict";

  // Relative times: <time datetime="RFC3339" data-relative> shows "5 min ago";
  // the absolute UTC time stays in the title for hover.
  function relative(iso) {
    var then = Date.parse(iso);
    if (isNaN(then)) return null;
    var s = Math.round((Date.now() - then) / 1000);
    var future = s < 0;
    s = Math.abs(s);
    var out;
    if (s < 45) out = s + " s";
    else if (s < 90 * 60) out = Math.round(s / 60) + " min";
    else if (s < 36 * 3600) out = Math.round(s / 3600) + " h";
    else out = Math.round(s / 86400) + " d";
    return future ? "in " + out : out + " ago";
  }
  function refreshTimes(root) {
    (root || document).querySelectorAll("time[data-relative]").forEach(function (el) {
      var r = relative(el.getAttribute("datetime"));
      if (r) el.textContent = r;
    });
  }

  // Copy buttons: <button data-copy-target="id">.
  function onClick(ev) {
    var btn = ev.target.closest("[data-copy-target]");
    if (btn) {
      var src = document.getElementById(btn.getAttribute("data-copy-target"));
      if (src && navigator.clipboard) {
        navigator.clipboard.writeText(src.textContent).then(function () {
          var old = btn.textContent;
          btn.textContent = "Copied";
          setTimeout(function () { btn.textContent = old; }, 1200);
        });
      }
      return;
    }
    // "Select all on this page" checkbox.
    var all = ev.target.closest("[data-select-all]");
    if (all) {
      document.querySelectorAll("input[name='" + all.getAttribute("data-select-all") + "']").forEach(function (cb) {
        cb.checked = all.checked;
      });
      updateSelection();
    }
  }
  function updateSelection() {
    var counter = document.querySelector("[data-selected-count]");
    if (!counter) return;
    var matching = document.querySelector("[data-all-matching]");
    var n = document.querySelectorAll("input[name='" + counter.getAttribute("data-selected-count") + "']:checked").length;
    var any = (matching && matching.checked) || n > 0;
    // "Replay selected…" with nothing selected only leads to an error page.
    document.querySelectorAll("[data-needs-selection]").forEach(function (b) { b.disabled = !any; });
    if (matching && matching.checked) {
      counter.textContent = counter.getAttribute("data-matching-text");
      return;
    }
    counter.textContent = n ? n + " selected" : "";
  }

  // "Select all N matching this filter" (bulk actions): ticking it ticks
  // every row shown, so the page agrees with what will be acted on;
  // unticking a row means the person wants a smaller selection, so the
  // "all matching" box goes off.
  function onSelectionChange(ev) {
    var t = ev.target;
    if (t.matches("[data-all-matching]")) {
      var counter = document.querySelector("[data-selected-count]");
      var name = counter ? counter.getAttribute("data-selected-count") : "id";
      document.querySelectorAll("input[name='" + name + "'], [data-select-all]").forEach(function (cb) {
        cb.checked = t.checked;
      });
    } else if (t.matches("input[type=checkbox]") && !t.checked) {
      var all = document.querySelector("[data-all-matching]");
      if (all) all.checked = false;
    }
    updateSelection();
  }

  // === Refreshes that keep focus ===
  // A polling fragment (hx-trigger "every Ns") is not swapped whole: the
  // fresh copy is morphed into the old one, so the elements stay and only
  // changed text and attributes are written. The element holding keyboard
  // focus, the scroll position of a scrolled table and an open <details>
  // survive a refresh; htmx's outerHTML swap would replace them and drop
  // focus to the body every few seconds.
  var CLIENT_CLASSES = ["keynav-current"];

  function isPolling(elt) {
    var t = elt && elt.getAttribute && elt.getAttribute("hx-trigger");
    return !!t && /(^|,)\s*every\s/.test(t);
  }

  // sameNode: may old be updated in place to become neu?
  function sameNode(old, neu) {
    if (old.nodeType !== neu.nodeType) return false;
    if (old.nodeType !== 1) return true;
    return old.tagName === neu.tagName && old.id === neu.id &&
      old.getAttribute("data-testid") === neu.getAttribute("data-testid");
  }

  // keepAttr: attributes the page itself owns, which the server never sends:
  // whether a <details> is open, and which chart bar is the tab stop.
  function keepAttr(old, name) {
    return (name === "open" && old.tagName === "DETAILS") ||
      (name === "tabindex" && old.hasAttribute("data-bar"));
  }

  function morphAttrs(old, neu) {
    var i, a;
    for (i = old.attributes.length - 1; i >= 0; i--) {
      a = old.attributes[i];
      if (a.name !== "class" && !neu.hasAttribute(a.name) && !keepAttr(old, a.name)) old.removeAttribute(a.name);
    }
    for (i = 0; i < neu.attributes.length; i++) {
      a = neu.attributes[i];
      if (a.name === "class" || keepAttr(old, a.name)) continue;
      if (old.getAttribute(a.name) !== a.value) old.setAttribute(a.name, a.value);
    }
    var cls = (neu.getAttribute("class") || "").trim();
    CLIENT_CLASSES.forEach(function (c) {
      if (old.classList.contains(c) && (" " + cls + " ").indexOf(" " + c + " ") < 0) cls = (cls + " " + c).trim();
    });
    if (cls === "") { if (old.hasAttribute("class")) old.removeAttribute("class"); }
    else if (old.getAttribute("class") !== cls) old.setAttribute("class", cls);
  }

  function morphNode(old, neu) {
    if (old.nodeType !== 1) {
      if (old.nodeValue !== neu.nodeValue) old.nodeValue = neu.nodeValue;
      return;
    }
    if (old.hasAttribute("hx-preserve")) return;
    morphAttrs(old, neu);
    // What someone is typing is theirs, not the server's.
    if (old === document.activeElement && /^(INPUT|TEXTAREA|SELECT)$/.test(old.tagName)) return;
    morphChildren(old, neu);
  }

  // morphChildren makes old's children look like neu's, reusing old nodes
  // in order where they match and inserting or removing the rest.
  function morphChildren(old, neu) {
    var kids = Array.prototype.slice.call(neu.childNodes);
    var cur = old.firstChild;
    kids.forEach(function (k) {
      var probe = cur, steps = 0, match = null;
      while (probe && steps < 8) {
        if (sameNode(probe, k)) { match = probe; break; }
        probe = probe.nextSibling; steps++;
      }
      if (!match) { old.insertBefore(k, cur); return; }
      while (cur !== match) { var gone = cur; cur = cur.nextSibling; old.removeChild(gone); }
      morphNode(match, k);
      cur = match.nextSibling;
    });
    while (cur) { var rest = cur; cur = cur.nextSibling; old.removeChild(rest); }
  }

  if (window.htmx) {
    htmx.defineExtension("keep-focus", {
      handleSwap: function (style, target, fragment) {
        if (style === "morphInner") {
          morphChildren(target, fragment);
          return Array.prototype.slice.call(target.children);
        }
        if (style !== "morphOuter") return false;
        var root = fragment.firstElementChild;
        if (!root || !sameNode(target, root)) {
          var added = Array.prototype.slice.call(fragment.children);
          target.replaceWith(fragment);
          return added;
        }
        morphNode(target, root);
        return [target];
      }
    });
    // Extensions apply to the elements under the one naming them.
    document.body.setAttribute("hx-ext", "keep-focus");
  }
  document.addEventListener("htmx:beforeSwap", function (ev) {
    var d = ev.detail;
    if (!d.shouldSwap || !isPolling(d.elt)) return;
    var spec = d.swapOverride || d.elt.getAttribute("hx-swap") || "innerHTML";
    var style = spec.trim().split(/\s+/)[0];
    if (style === "outerHTML") d.swapOverride = spec.trim().replace(/^\S+/, "morphOuter");
    else if (style === "innerHTML") d.swapOverride = spec.trim().replace(/^\S+/, "morphInner");
  });

  // === Refresh failures say so ===
  // A refresh that fails leaves the old numbers on the page; the banner
  // (#outage, in the layout) says since when and how old they are, until a
  // request succeeds again. htmx keeps polling through the outage, so the
  // page recovers by itself.
  var lastOK = Date.now(), failingSince = 0;
  function clock(t) { return new Date(t).toISOString().slice(11, 19) + " UTC"; }
  function showOutage(what) {
    var b = document.getElementById("outage");
    if (!b) return;
    if (!failingSince) failingSince = Date.now();
    var msg = what + " since " + clock(failingSince) + " — retrying; the numbers below are from " + clock(lastOK) + ".";
    if (b.textContent !== msg) b.textContent = msg;
    b.hidden = false;
  }
  function clearOutage() {
    lastOK = Date.now();
    failingSince = 0;
    var b = document.getElementById("outage");
    if (b && !b.hasAttribute("data-outage-page")) { b.hidden = true; b.textContent = ""; }
  }
  function errorCode(xhr) {
    var m = /data-code="([a-z_]+)"/.exec(xhr.responseText || "");
    return m ? m[1] : "";
  }
  function errorText(xhr) {
    var t = document.createElement("template");
    t.innerHTML = xhr.responseText || "";
    var el = t.content.querySelector("[data-code]");
    return el ? el.textContent.trim() : "error " + xhr.status;
  }
  document.addEventListener("htmx:responseError", function (ev) {
    var xhr = ev.detail.xhr;
    if (xhr.status === 503 && errorCode(xhr) === "database_unavailable") showOutage("Database unreachable");
    else if (xhr.status >= 500 || isPolling(ev.detail.elt)) showOutage("This page cannot refresh (" + errorText(xhr) + ")");
  });
  document.addEventListener("htmx:sendError", function () { showOutage("The console is unreachable"); });
  document.addEventListener("htmx:afterRequest", function (ev) { if (ev.detail.successful) clearOutage(); });

  // A whole page that answered 503 reloads itself once the database is back.
  function watchOutagePage() {
    var b = document.querySelector("[data-outage-retry]");
    if (!b || !window.fetch) return;
    var every = 1000 * (parseInt(b.getAttribute("data-outage-retry"), 10) || 5);
    var timer = setInterval(function () {
      fetch(location.href, { credentials: "same-origin", cache: "no-store" }).then(function (r) {
        if (r.ok) { clearInterval(timer); location.reload(); }
      }, function () {});
    }, every);
  }

  // === Charts: one tab stop each ===
  // Tab reaches a chart once (its newest bar); Left/Right/Home/End move
  // between its bars (roving tabindex) and Enter follows the bar's link.
  // The bar pointed at or focused is written out beside the chart, not only
  // in a tooltip.
  function chartOf(el) { return el && el.closest ? el.closest("[data-chart]") : null; }
  function barsOf(chart) { return Array.prototype.slice.call(chart.querySelectorAll("a[data-bar]")); }
  function initCharts() {
    document.querySelectorAll("[data-chart]").forEach(function (chart) {
      var bars = barsOf(chart);
      if (!bars.length) return;
      var stop = bars.findIndex(function (b) { return b.getAttribute("tabindex") === "0"; });
      if (stop < 0) stop = bars.length - 1;
      bars.forEach(function (b, i) { b.setAttribute("tabindex", i === stop ? "0" : "-1"); });
      // A refresh rewrote the readout: show again what is pointed at.
      var shown = chart.querySelector("a[data-bar]:focus") || chart.querySelector("[data-bar]:hover");
      if (shown) readout(chart, shown);
    });
  }
  function readout(chart, bar) {
    var out = chart.querySelector("[data-readout]");
    if (!out) return;
    var text = bar ? bar.getAttribute("data-tip") : out.getAttribute("data-default");
    if (text && out.textContent !== text) out.textContent = text;
  }
  function onChartPoint(ev) {
    var bar = ev.target.closest && ev.target.closest("[data-bar]");
    if (bar) readout(chartOf(bar), bar);
  }
  function onChartLeave(ev) {
    var chart = chartOf(ev.target);
    if (!chart || chart.contains(ev.relatedTarget)) return;
    readout(chart, chart.querySelector("a[data-bar]:focus"));
  }
  function onChartKey(ev) {
    var bar = ev.target.closest && ev.target.closest("a[data-bar]");
    if (!bar || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var bars = barsOf(chartOf(bar)), i = bars.indexOf(bar), next;
    switch (ev.key) {
      case "ArrowRight": next = Math.min(bars.length - 1, i + 1); break;
      case "ArrowLeft": next = Math.max(0, i - 1); break;
      case "Home": next = 0; break;
      case "End": next = bars.length - 1; break;
      case "Enter": ev.preventDefault(); location.assign(bar.getAttribute("href")); return;
      default: return;
    }
    ev.preventDefault();
    bars.forEach(function (b, j) { b.setAttribute("tabindex", j === next ? "0" : "-1"); });
    bars[next].focus();
  }

  // === Keyboard shortcuts ===
  // g o / g d / g g / g j go to a page, / focuses the page's search or
  // filter, ? lists the shortcuts, j/k highlight the next/previous row of a
  // list marked data-keynav and Enter opens it. None fires while typing in
  // a field or with Ctrl, Alt or Meta held.
  var GO = { o: "/", d: "/dead-letters", g: "/groups", j: "/jobs" };
  var SHORTCUTS = [
    ["g o", "Overview"], ["g d", "Dead letters"], ["g g", "Error groups"], ["g j", "Jobs"],
    ["/", "Search or filter this page"], ["j / k", "Highlight the next / previous row of a list"],
    ["Enter", "Open the highlighted row"], ["← → Home End", "Move between the bars of a chart"],
    ["?", "Show this list"], ["Esc", "Close it"]
  ];
  var gAt = 0;

  function typing(t) {
    if (!t || !t.tagName) return false;
    if (t.isContentEditable || /^(TEXTAREA|SELECT)$/.test(t.tagName)) return true;
    return t.tagName === "INPUT" && !/^(checkbox|radio|button|submit|reset)$/.test(t.type);
  }
  function keynavRows() {
    var lists = document.querySelectorAll("[data-keynav]");
    for (var i = 0; i < lists.length; i++) {
      var l = lists[i];
      var rows = l.tagName === "TABLE" ? l.querySelectorAll(":scope > tbody > tr") : l.querySelectorAll(":scope > li");
      if (rows.length) return Array.prototype.slice.call(rows);
    }
    return [];
  }
  function rowLink(row) { return row.querySelector("[data-keynav-open]") || row.querySelector("a[href]"); }
  function moveRow(step) {
    var rows = keynavRows();
    if (!rows.length) return false;
    var cur = rows.findIndex(function (r) { return r.classList.contains("keynav-current"); });
    var next = cur < 0 ? (step > 0 ? 0 : rows.length - 1) : Math.max(0, Math.min(rows.length - 1, cur + step));
    if (cur >= 0) rows[cur].classList.remove("keynav-current");
    rows[next].classList.add("keynav-current");
    rows[next].scrollIntoView({ block: "nearest" });
    var a = rowLink(rows[next]);
    if (a) a.focus({ preventScroll: true });
    return true;
  }
  function searchField() {
    return document.querySelector("form[role=search] input[type=search], input[type=search]") ||
      document.querySelector("form[role=search] input:not([type=hidden]):not([type=checkbox]), form[role=search] select");
  }
  function openHelp() {
    var d = document.getElementById("shortcuts");
    if (!d) {
      d = document.createElement("dialog");
      d.id = "shortcuts";
      d.className = "shortcuts";
      d.setAttribute("aria-labelledby", "shortcuts-h");
      d.setAttribute("data-testid", "shortcuts");
      var h = document.createElement("h2");
      h.id = "shortcuts-h";
      h.textContent = "Keyboard shortcuts";
      var dl = document.createElement("dl");
      SHORTCUTS.forEach(function (s) {
        var dt = document.createElement("dt"), dd = document.createElement("dd");
        s[0].split(" ").forEach(function (k, i) {
          if (i) dt.appendChild(document.createTextNode(" "));
          if (k === "/" && s[0] !== "/") { dt.appendChild(document.createTextNode("/")); return; }
          var kbd = document.createElement("kbd");
          kbd.textContent = k;
          dt.appendChild(kbd);
        });
        dd.textContent = s[1];
        dl.appendChild(dt);
        dl.appendChild(dd);
      });
      var form = document.createElement("form");
      form.method = "dialog";
      var close = document.createElement("button");
      close.className = "btn";
      close.textContent = "Close";
      form.appendChild(close);
      d.appendChild(h);
      d.appendChild(dl);
      d.appendChild(form);
      document.body.appendChild(d);
    }
    if (!d.open) d.showModal();
  }

  function onKey(ev) {
    if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey || ev.repeat) return;
    if (typing(ev.target) || document.querySelector("dialog[open]")) return;
    var k = ev.key;
    if (gAt && Date.now() - gAt < 1500) {
      gAt = 0;
      if (GO[k]) { ev.preventDefault(); location.assign(GO[k]); }
      return;
    }
    gAt = 0;
    switch (k) {
      case "g": gAt = Date.now(); return;
      case "/":
        var s = searchField();
        if (s) { ev.preventDefault(); s.focus(); if (s.select) s.select(); }
        return;
      case "?": ev.preventDefault(); openHelp(); return;
      case "j": case "k":
        if (moveRow(k === "j" ? 1 : -1)) ev.preventDefault();
        return;
      case "Enter":
        var f = document.activeElement;
        if (f && f.closest("a, button, input, select, textarea, summary")) return;
        var row = document.querySelector("[data-keynav] .keynav-current");
        var a = row && rowLink(row);
        if (a) { ev.preventDefault(); a.click(); }
    }
  }

  document.addEventListener("click", onClick);
  document.addEventListener("change", function (ev) {
    if (ev.target.matches("input[type=checkbox]")) onSelectionChange(ev);
  });
  document.addEventListener("keydown", onKey);
  document.addEventListener("keydown", onChartKey);
  document.addEventListener("focusin", onChartPoint);
  document.addEventListener("mouseover", onChartPoint);
  document.addEventListener("focusout", onChartLeave);
  document.addEventListener("mouseout", onChartLeave);
  // On a phone the navigation is one row that scrolls sideways: bring the
  // current page's entry into it.
  function showCurrentNav() {
    var nav = document.querySelector(".topbar nav");
    var cur = nav && nav.querySelector('[aria-current="page"]');
    if (cur && nav.scrollWidth > nav.clientWidth) {
      nav.scrollLeft = cur.offsetLeft - (nav.clientWidth - cur.offsetWidth) / 2;
    }
  }
  document.addEventListener("DOMContentLoaded", function () {
    refreshTimes(); updateSelection(); initCharts(); watchOutagePage(); showCurrentNav();
  });
  document.addEventListener("htmx:afterSwap", function (ev) {
    refreshTimes(ev.target); updateSelection(); initCharts();
  });
  setInterval(refreshTimes, 30000);
})();
