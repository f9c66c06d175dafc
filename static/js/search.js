// The animal list's search box, with JavaScript on: typing hides the rows already on the page whose name
// does not contain the text, as the server's search would. Submitting the form still searches on the
// server, which is all that happens without JavaScript.
(() => {
  const box = document.querySelector("input[data-search-rows]");
  const summary = document.getElementById("search-summary");
  if (!box || !summary) return;
  const rows = Array.from(document.getElementById(box.dataset.searchRows)?.rows || []);
  const fold = (text) => text.normalize("NFKC").toLocaleLowerCase();
  const fetched = Number(summary.dataset.fetched);
  const original = summary.textContent;
  box.addEventListener("input", () => {
    const wanted = fold(box.value.trim());
    let shown = 0;
    for (const row of rows) {
      const match = fold(row.dataset.name).includes(wanted);
      row.hidden = !match;
      if (match) shown += 1;
    }
    summary.textContent = wanted
      ? `${shown} of the ${fetched} animals fetched match “${box.value.trim()}” (press Filter to search them all again).`
      : original;
  });
})();
