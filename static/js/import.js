// The progress of a bulk import: asks its JSON once a second and moves the bar; when sending stops
// (done, paused, stopped), reloads the page for the results. Without JavaScript the page refreshes itself.
(function () {
  "use strict";
  var box = document.querySelector("[data-progress-url]");
  if (!box) { return; }
  var bar = document.getElementById("import-bar");
  var counts = document.getElementById("import-counts");
  var shown = box.getAttribute("data-state");

  function update(progress) {
    var settled = progress.created + progress.failed + progress.unknown;
    bar.max = progress.total;
    bar.value = settled;
    bar.textContent = settled + " of " + progress.total;
    counts.textContent = settled + " of " + progress.total + " rows done: " + progress.created + " added, " +
      progress.failed + " refused, " + progress.unknown + " unknown.";
    if (progress.state !== shown && progress.state !== "running" && progress.state !== "queued") {
      window.location.reload();
      return false;
    }
    return true;
  }

  function ask() {
    fetch(box.getAttribute("data-progress-url"), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (answer) { return answer.ok ? answer.json() : null; })
      .then(function (progress) {
        if (!progress || update(progress)) { window.setTimeout(ask, 1000); }
      })
      .catch(function () { window.setTimeout(ask, 3000); });
  }

  window.setTimeout(ask, 500);
})();
