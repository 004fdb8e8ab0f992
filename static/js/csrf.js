// Sends the page's CSRF token with every htmx request, as the
// X-CSRF-Token header the server checks on anything that changes state.
// Forms carry it in a hidden _csrf field too; this covers hx-post on
// buttons and links outside a form. Loaded from /static: the CSP allows
// no inline script.
(function () {
  "use strict";
  document.addEventListener("htmx:configRequest", function (ev) {
    var meta = document.querySelector('meta[name="csrf-token"]');
    if (meta && meta.content) {
      ev.detail.headers["X-CSRF-Token"] = meta.content;
    }
  });
})();
