// The System page's bundle upload (system/system.html, #upgrade-form). A bundle is a
// few hundred MB, and a plain form post shows nothing until the last byte has arrived,
// so the page sends it itself and shows how much has gone (#upload-progress). Then, as
// after a plain post: the job page, where RAUC's check and install show their own
// progress; or the form again with the reason it was refused (a page of the server's:
// its #slots card replaces this one); or, when nginx refused before Django saw it (not
// an admin, too big) or the connection broke, the status line says so. Without
// JavaScript the form posts as usual.
(function () {
  "use strict";

  function megabytes(bytes) {
    return (bytes / 1e6).toFixed(bytes < 10e6 ? 1 : 0) + " MB";
  }

  function bind() {
    var form = document.getElementById("upgrade-form");
    if (form && !form.dataset.bound) {
      form.dataset.bound = "1";
      form.addEventListener("submit", send);
    }
  }

  function send(event) {
    var form = event.currentTarget;
    var status = document.getElementById("upload-status");
    var bar = document.getElementById("upload-progress");
    var said = document.getElementById("upload-sent");
    var button = document.getElementById("upload-bundle");
    var request = new XMLHttpRequest();
    event.preventDefault();

    function stopped(text) {
      said.textContent = text;
      said.className = "bad";
      button.disabled = false;
    }

    request.open("POST", form.action);
    request.upload.addEventListener("progress", function (progress) {
      if (progress.lengthComputable) {
        bar.max = progress.total;
        bar.value = progress.loaded;
        said.textContent = Math.floor(100 * progress.loaded / progress.total) + " % of " +
          megabytes(progress.total) + " sent";
      }
    });
    request.addEventListener("load", function () {
      var action = new URL(form.action, window.location.href).pathname;
      var landed = request.responseURL ? new URL(request.responseURL) : null;
      if (landed && landed.pathname !== action && request.status === 200) {
        window.location.assign(request.responseURL);   // the job page
        return;
      }
      var page = new DOMParser().parseFromString(request.responseText, "text/html");
      var card = page.getElementById("slots");
      if (card && request.status < 500) {
        document.getElementById("slots").replaceWith(document.importNode(card, true));
        bind();
        return;
      }
      var title = page.querySelector("title, h1");
      stopped("The upload was refused (HTTP " + request.status +
        (title ? ": " + title.textContent.trim() : "") + "); nothing was installed.");
    });
    request.addEventListener("error", function () {
      stopped("The upload stopped: the connection to the box was lost; nothing was installed.");
    });
    button.disabled = true;
    status.hidden = false;
    said.className = "";
    said.textContent = "starting the upload";
    request.send(new FormData(form));
  }

  bind();
}());
