// The progress of a bulk import: asks its JSON once a second and moves the bar; when sending stops
// (done, paused, stopped), reloads the page for the results. Without JavaScript the page refreshes itself.
(function () {
  "use strict";
  var box = document.querySelector("[data-progress-url]");
  if (!box) { return; }
  var bar = document.getElementById("import-bar");
  var counts = document.getElementById("import-counts");
  var shown = box.getAttribute("data-state");
  // The words come from the server, in the page's language (imports/show.html): each message with its
  // {placeholders}, the counts' in a form for each plural category ("one", "other") of the number of rows.
  var language = document.documentElement.lang;
  var plural = new Intl.PluralRules(language);

  function number(count) { return count.toLocaleString(language); }

  function filled(text, values) {
    return text.replace(/\{(\w+)\}/g, function (whole, name) {
      return Object.prototype.hasOwnProperty.call(values, name) ? values[name] : whole;
    });
  }

  function update(progress) {
    var settled = progress.created + progress.failed + progress.unknown;
    var values = {
      done: number(settled), total: number(progress.total), num: number(progress.total),
      added: number(progress.created), refused: number(progress.failed), unknown: number(progress.unknown)
    };
    bar.max = progress.total;
    bar.value = settled;
    bar.textContent = filled(bar.getAttribute("data-text"), values);
    counts.textContent = filled(
      counts.getAttribute("data-" + plural.select(progress.total)) || counts.getAttribute("data-other"), values
    );
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
