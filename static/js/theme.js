// Runs in the page's <head>, before anything is drawn, so no page flashes the wrong colours: the visitor's
// choice (light, dark or automatic, kept in this browser by portal.js) becomes Bootstrap's colour mode;
// automatic follows the system's preference.
(function () {
  let choice = "auto";
  try {
    const kept = window.localStorage.getItem("theme");
    if (kept === "light" || kept === "dark") { choice = kept; }
  } catch (error) { /* storage blocked: automatic */ }
  const dark = choice === "dark" || (choice === "auto" && window.matchMedia("(prefers-color-scheme: dark)").matches);
  document.documentElement.setAttribute("data-bs-theme", dark ? "dark" : "light");
  document.documentElement.setAttribute("data-theme-choice", choice);
})();
