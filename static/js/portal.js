// Disable a form's submit button once it has been used, so a double click sends the form once.
// The server still refuses a second animal per form; this only spares the user the wait.
document.querySelectorAll("button[data-submit-once]").forEach((button) => {
  button.form.addEventListener("submit", () => {
    window.setTimeout(() => { button.disabled = true; }, 0);
  });
});

// On the switch form, name the environment everyone will see as soon as the admin picks it.
document.querySelectorAll("select[data-switch-select]").forEach((select) => {
  const target = document.querySelector("[data-switch-target]");
  select.addEventListener("change", () => { target.textContent = select.value; });
});
