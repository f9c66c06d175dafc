// Disable a form's submit button once it has been used, so a double click sends the form once.
// The server still refuses a second animal per form; this only spares the user the wait.
document.querySelectorAll("button[data-submit-once]").forEach((button) => {
  button.form.addEventListener("submit", () => {
    window.setTimeout(() => { button.disabled = true; }, 0);
  });
});
