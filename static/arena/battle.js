// Keyboard shortcuts: each button names its keys in data-key. Ignored while typing in a field, and a
// form is submitted once only (a held key or a double press cannot send a second vote).
(function () {
  var sent = false;
  document.addEventListener("keydown", function (event) {
    if (sent || event.ctrlKey || event.metaKey || event.altKey) return;
    var tag = (event.target && event.target.tagName) || "";
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT") return;
    var key = event.key.toLowerCase();
    var buttons = document.querySelectorAll("button[data-key]");
    for (var i = 0; i < buttons.length; i++) {
      if (buttons[i].disabled) continue;  // the vote opens only once both streamed answers are complete
      if (buttons[i].getAttribute("data-key").split(" ").indexOf(key) !== -1) {
        sent = true;
        event.preventDefault();
        buttons[i].form.requestSubmit(buttons[i]);
        return;
      }
    }
  });
  document.querySelectorAll("form.vote, form.next, form.own-prompt").forEach(function (form) {
    form.addEventListener("submit", function () {
      sent = true;
      // Disabled after the form data is built, or the pressed button's value would be dropped.
      setTimeout(function () { form.querySelectorAll("button").forEach(function (b) { b.disabled = true; }); }, 0);
    });
  });
  // The result goes into the live region after load, so it is announced as a change.
  var announcer = document.getElementById("announcer");
  var message = announcer && announcer.getAttribute("data-announce");
  if (message) {
    setTimeout(function () { announcer.textContent = message; }, 150);
  }
})();

// A battle being prepared: ask for its state every second and reload once it is ready (or voided).
(function () {
  var box = document.getElementById("preparing");
  var url = box && box.getAttribute("data-poll");
  if (!url) return;
  var delay = 1000;
  function poll() {
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin", cache: "no-store" })
      .then(function (response) { return response.ok ? response.json() : { status: "generating" }; })
      .then(function (state) {
        if (state.status !== "generating") { window.location.reload(); return; }
        delay = Math.min(delay * 1.25, 4000);
        setTimeout(poll, delay);
      })
      .catch(function () { delay = Math.min(delay * 2, 8000); setTimeout(poll, delay); });
  }
  setTimeout(poll, delay);
})();
