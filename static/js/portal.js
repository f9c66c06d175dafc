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
