// The animal list's search box, with JavaScript on: typing hides the rows on this page whose name does
// not contain the text. Each row carries its name folded by the server (data-folded), and the typed text
// is folded the same way here, so "strasse" finds "Straße" as the server's search does. Pressing Filter
// searches on the server, which is all that happens without JavaScript.
(() => {
  const box = document.querySelector("input[data-search-rows]");
  const summary = document.getElementById("search-summary");
  const body = box && document.getElementById(box.dataset.searchRows);
  if (!box || !summary || !body) return;
  const rows = Array.from(body.rows);
  // NFKC and lower case, then the two foldings lower case misses: ß to ss, and the final sigma.
  const fold = (text) => text.normalize("NFKC").toLowerCase().replaceAll("ß", "ss").replaceAll("ς", "σ");
  const original = summary.textContent;
  const caption = body.closest("table")?.querySelector("caption");
  const originalCaption = caption?.textContent;
  const animals = (count) => `${count} animal${count === 1 ? "" : "s"}`;
  box.addEventListener("input", () => {
    const typed = box.value.trim();
    let shown = 0;
    for (const row of rows) {
      row.hidden = !row.dataset.folded.includes(fold(typed));
      if (!row.hidden) shown += 1;
    }
    summary.textContent = typed
      ? `${shown} of the ${animals(rows.length)} on this page contain${shown === 1 ? "s" : ""} “${typed}”. ` +
        "Press Filter to search everything the pet store returned."
      : original;
    if (caption) caption.textContent = typed ? `${animals(shown)} shown` : originalCaption;
  });
})();
