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
  // As the server folds (browse.folded), character by character: NFKD without combining marks (accents), a
  // character that would fold to more than 3 kept as it is, lower case, then the two foldings lower case misses:
  // ß to ss, and the final sigma.
  const foldOne = (char) => {
    const folded = char.normalize("NFKD").replace(/\p{M}/gu, "");
    return Array.from(folded).length > 3 ? char : folded;
  };
  const fold = (text) => Array.from(text, foldOne).join("").toLowerCase()
    .replaceAll("ß", "ss").replaceAll("ς", "σ");
  const original = summary.textContent;
  const caption = body.closest("table")?.querySelector("caption");
  const originalCaption = caption?.textContent;
  // The words come from the server, in the page's language (catalog/list.html): each message with its
  // {placeholders}, in a form for each plural category ("one", "other") of the count it agrees with.
  const language = document.documentElement.lang;
  const plural = new Intl.PluralRules(language);
  const message = (element, name, count) =>
    element.getAttribute(`data-${name}-${plural.select(count)}`) ?? element.getAttribute(`data-${name}-other`);
  const filled = (text, values) =>
    text.replace(/\{(\w+)\}/g, (whole, name) => (Object.hasOwn(values, name) ? values[name] : whole));
  const number = (count) => count.toLocaleString(language);
  box.addEventListener("input", () => {
    const typed = box.value.trim();
    let shown = 0;
    for (const row of rows) {
      row.hidden = !row.dataset.folded.includes(fold(typed));
      if (!row.hidden) shown += 1;
    }
    // As on the server, the verb agrees with how many match ("1 ... contains", "3 ... contain").
    const matches = plural.select(shown) === "one" ? "one-matches" : "matches";
    const counts = { shown: number(shown), num: number(rows.length), typed };
    summary.textContent = typed
      ? `${filled(message(summary, matches, rows.length), counts)} ${summary.dataset.pressFilter}`
      : original;
    if (caption) {
      caption.textContent = typed ? filled(message(caption, "shown", shown), { num: number(shown) }) : originalCaption;
    }
  });
})();
