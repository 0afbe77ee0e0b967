// The pages' small behaviours, in a file of its own: the Content-Security-Policy allows no
// inline script. Listening on the document covers fragments htmx swaps in later.
//
// One-click copy: a button with data-copy="ID" copies the text of the element with that id
// (an API key, a signing secret, a public key, a portal link) and says so for two seconds.
(function () {
  function fallback(text) {
    // Outside a secure context (plain http on another host) there is no clipboard API.
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "offscreen";
    document.body.appendChild(area);
    area.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    document.body.removeChild(area);
    return ok ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button[data-copy]");
    if (!button) return;
    event.preventDefault();
    var source = document.getElementById(button.dataset.copy);
    if (!source) return;
    var text = source.textContent.trim();
    var copy = navigator.clipboard && window.isSecureContext
      ? navigator.clipboard.writeText(text)
      : fallback(text);
    var label = button.dataset.label || button.textContent;
    button.dataset.label = label;
    copy.then(function () { button.textContent = "Copied"; },
              function () { button.textContent = "Select and copy"; });
    setTimeout(function () { button.textContent = label; }, 2000);
  });
})();

// Busy: while htmx sends a form, its submit buttons are disabled (no second send) and the
// form carries htmx's own `htmx-request` class, which the stylesheet shows.
(function () {
  function buttons(event) {
    var elt = event.detail && event.detail.elt;
    return elt && elt.tagName === "FORM"
      ? elt.querySelectorAll("button[type=submit], button:not([type])")
      : [];
  }
  document.addEventListener("htmx:beforeRequest", function (event) {
    buttons(event).forEach(function (b) { b.disabled = true; });
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    buttons(event).forEach(function (b) { b.disabled = false; });
  });
})();

// The event-type picker (templates/endpoint_form.html): a filter box (hidden without script,
// where the list scrolls) shows the types whose name or description contains what is typed;
// checking a type chooses "Only the event types checked below".
(function () {
  function show(box) {
    var list = document.getElementById(box.dataset.pickerFilter);
    if (!list) return;
    var words = box.value.trim().toLowerCase();
    list.querySelectorAll("li").forEach(function (li) {
      li.hidden = words !== "" && li.textContent.toLowerCase().indexOf(words) < 0;
    });
  }
  function reveal(root) {
    root.querySelectorAll("[data-picker-filter]").forEach(function (box) {
      var label = box.closest("label");
      if (label) label.hidden = false;
    });
  }
  document.addEventListener("DOMContentLoaded", function () { reveal(document); });
  document.addEventListener("htmx:load", function (event) { reveal(event.target); });
  document.addEventListener("input", function (event) {
    var box = event.target;
    if (box.matches && box.matches("[data-picker-filter]")) show(box);
  });
  // Enter in the filter box filters; it does not submit the endpoint form.
  document.addEventListener("keydown", function (event) {
    var box = event.target;
    if (event.key === "Enter" && box.matches && box.matches("[data-picker-filter]")) {
      event.preventDefault();
    }
  });
  document.addEventListener("change", function (event) {
    var box = event.target;
    if (!box.matches || !box.matches("fieldset.picker input[type=checkbox]") || !box.checked) return;
    var some = box.closest("fieldset").querySelector("input[name=filter][value=some]");
    if (some) some.checked = true;
  });
})();
