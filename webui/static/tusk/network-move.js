// The Network status page right after an Apply that moves the management address
// (webui/network/templates/network/status.html, #moving). The agent takes away the address
// this page came from, and a poll to it may then hang on its kept-alive connection with no
// error, so the server's HX-Redirect may never arrive. The browser goes to the first
// confirm link at the new address when the job has succeeded, when a poll fails or times
// out (hx-request timeout), or, as a last resort, when no poll has answered for a while.
// Never when the job failed: the old address stays, and the page says why.
(function () {
  "use strict";
  var SILENCE_MS = 15000;
  var heard = Date.now();
  var gone = false;

  function go() {
    var panel = document.getElementById("moving");
    var link = panel && panel.querySelector("a.confirm-url");
    // no link: the new address comes from DHCP, and the page says where to find it
    if (gone || !link || panel.dataset.state === "failed") {
      return;
    }
    gone = true;
    window.location.assign(link.href);
  }

  function succeeded() {
    var panel = document.getElementById("moving");
    if (panel && panel.dataset.state === "succeeded") {
      go();
    }
  }

  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail.successful) {
      heard = Date.now();
    }
  });
  document.addEventListener("htmx:afterSettle", succeeded);
  ["htmx:timeout", "htmx:sendError", "htmx:responseError"].forEach(function (name) {
    document.addEventListener(name, go);
  });
  window.setInterval(function () {
    if (Date.now() - heard > SILENCE_MS) {
      go();
    }
  }, 1000);
  succeeded();
}());
