// Disable a form's submit button once it has been used, so a double click sends the form once.
// The server still refuses a second animal per form; this only spares the user the wait.
document.querySelectorAll("button[data-submit-once]").forEach((button) => {
  button.form.addEventListener("submit", () => {
    window.setTimeout(() => { button.disabled = true; }, 0);
  });
});

// "Select all" buttons (the promote page): tick every box of that name in the form that is not disabled. Shown
// only where this script runs.
document.querySelectorAll("button[data-select-all]").forEach((button) => {
  button.hidden = false;
  button.addEventListener("click", () => {
    button.form.querySelectorAll(`input[type=checkbox][name="${button.dataset.selectAll}"]:not(:disabled)`)
      .forEach((box) => { box.checked = true; });
  });
});

// On the switch form, name the environment everyone will see as soon as the admin picks it.
document.querySelectorAll("select[data-switch-select]").forEach((select) => {
  const target = document.querySelector("[data-switch-target]");
  select.addEventListener("change", () => { target.textContent = select.value; });
});

// The colour theme control on every page: light, dark or automatic (the system's preference), kept in this
// browser. theme.js applied the kept choice before the page was drawn; this keeps the buttons in step.
(() => {
  const root = document.documentElement;
  const system = window.matchMedia("(prefers-color-scheme: dark)");
  const buttons = document.querySelectorAll("[data-theme-value]");
  const apply = (choice) => {
    const dark = choice === "dark" || (choice === "auto" && system.matches);
    root.setAttribute("data-bs-theme", dark ? "dark" : "light");
    root.setAttribute("data-theme-choice", choice);
    buttons.forEach((button) => {
      button.setAttribute("aria-pressed", String(button.dataset.themeValue === choice));
    });
  };
  buttons.forEach((button) => {
    button.addEventListener("click", () => {
      const choice = button.dataset.themeValue;
      try {
        if (choice === "auto") { window.localStorage.removeItem("theme"); } else { window.localStorage.setItem("theme", choice); }
      } catch (error) { /* storage blocked: the choice lasts for this page */ }
      apply(choice);
    });
  });
  system.addEventListener("change", () => {
    if (root.getAttribute("data-theme-choice") === "auto") { apply("auto"); }
  });
  apply(root.getAttribute("data-theme-choice") || "auto");
})();

// Every moment on the page in the reader's time zone and in the page's language. The server writes each one as
// <time datetime="2026-11-28T13:05:00Z">…UTC</time> (what a browser without script shows); this rewrites its text
// with Intl.DateTimeFormat, naming the zone, and keeps the UTC text as its title.
(() => {
  const moments = document.querySelectorAll("time[datetime]");
  if (!moments.length || typeof Intl !== "object") { return; }
  let format;
  try {
    format = new Intl.DateTimeFormat(document.documentElement.lang || undefined, {
      year: "numeric", month: "short", day: "numeric",
      hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short",
    });
  } catch (error) { return; /* a language the browser cannot format: the page keeps UTC */ }
  moments.forEach((moment) => {
    const value = moment.getAttribute("datetime");
    if (!value.includes("T")) { return; }  // a day, not a moment: no zone to show it in
    const when = new Date(value);
    if (Number.isNaN(when.getTime())) { return; }
    moment.title = moment.textContent;
    moment.textContent = format.format(when);
  });
})();
