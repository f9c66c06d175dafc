// Passkeys: adding one on /account/passkeys, and signing in with one on /login and at the second step.
// Each ceremony asks the portal for its options (JSON, with a one-time challenge), lets the browser make or use
// the credential (WebAuthn's JSON forms: parseCreationOptionsFromJSON, parseRequestOptionsFromJSON, toJSON),
// and sends the answer back. The portal's answer names the page to go on to, or says what went wrong, in the
// page's language. The buttons stay hidden in a browser that cannot use passkeys.
(() => {
  const supported = window.PublicKeyCredential
    && typeof PublicKeyCredential.parseCreationOptionsFromJSON === "function"
    && typeof PublicKeyCredential.parseRequestOptionsFromJSON === "function";

  const post = async (url, csrf, body) => {
    const response = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
      body: JSON.stringify(body || {}),
    });
    const answer = await response.json().catch(() => ({}));
    if (!response.ok) {
      const failure = new Error(answer.error || "");
      failure.fromPortal = Boolean(answer.error);
      throw failure;
    }
    return answer;
  };

  // Run `ceremony` when `button` is pressed; show what went wrong in `status`.
  const wire = (button, status, ceremony) => {
    if (!supported) {
      status.textContent = button.dataset.unsupported;
      return;
    }
    button.hidden = false;
    button.addEventListener("click", async () => {
      button.disabled = true;
      status.textContent = "";
      try {
        const answer = await ceremony();
        window.location.assign(answer.redirect);
      } catch (failure) {
        status.textContent = failure.fromPortal ? failure.message : button.dataset.failed;
        button.disabled = false;
      }
    });
  };

  document.querySelectorAll(".passkey-sign-in").forEach((button) => {
    const status = document.getElementById(`${button.id}-status`);
    wire(button, status, async () => {
      const options = await post(button.dataset.options, button.dataset.csrf);
      const credential = await navigator.credentials.get({
        publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options),
      });
      return post(button.dataset.url, button.dataset.csrf, { credential: credential.toJSON() });
    });
  });

  const add = document.getElementById("passkey-add");
  if (add) {
    wire(add, document.getElementById("passkey-add-status"), async () => {
      // A name too long is said before the ceremony, as the portal would refuse it after; it is never cut.
      const field = document.getElementById("passkey-name");
      if ([...field.value.trim()].length > Number(field.dataset.max)) {
        const failure = new Error(field.dataset.tooLong);
        failure.fromPortal = true;
        throw failure;
      }
      const options = await post(add.dataset.options, add.dataset.csrf);
      const credential = await navigator.credentials.create({
        publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options),
      });
      const name = document.getElementById("passkey-name").value;
      return post(add.dataset.url, add.dataset.csrf, { credential: credential.toJSON(), name });
    });
  }
})();
