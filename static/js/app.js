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

  // j/k move through list rows (rows marked data-row), Enter opens the row.
  function onKey(ev) {
    if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var t = ev.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    var rows = Array.prototype.slice.call(document.querySelectorAll("[data-row]"));
    if (!rows.length) return;
    var cur = rows.findIndex(function (r) { return r.classList.contains("selected-row"); });
    if (ev.key === "j" || ev.key === "k") {
      var next = ev.key === "j" ? Math.min(rows.length - 1, cur + 1) : Math.max(0, cur - 1);
      if (cur >= 0) rows[cur].classList.remove("selected-row");
      rows[next].classList.add("selected-row");
      rows[next].scrollIntoView({ block: "nearest" });
      var link = rows[next].querySelector("a");
      if (link) link.focus({ preventScroll: true });
      ev.preventDefault();
    } else if (ev.key === "Enter" && cur >= 0 && document.activeElement === document.body) {
      var a = rows[cur].querySelector("a");
      if (a) a.click();
    }
  }

  document.addEventListener("click", onClick);
  document.addEventListener("change", function (ev) {
    if (ev.target.matches("input[type=checkbox]")) onSelectionChange(ev);
  });
  document.addEventListener("keydown", onKey);
  document.addEventListener("DOMContentLoaded", function () { refreshTimes(); updateSelection(); });
  document.addEventListener("htmx:afterSwap", function (ev) { refreshTimes(ev.target); updateSelection(); });
  setInterval(refreshTimes, 30000);
})();
