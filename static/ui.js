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

// Times: the server writes <time class="rel" datetime="…Z">2024-05-01 12:00:00 UTC</time>;
// here the text becomes "3 min ago" or "in 25 s", kept current, and the title the exact time
// in the browser's zone with UTC beside it. Content htmx swaps in is upgraded as it arrives.
(function () {
  function ago(ms) {
    var s = Math.round((ms - Date.now()) / 1000);
    var a = Math.abs(s);
    var text;
    if (a < 5) return "just now";
    if (a < 60) text = a + " s";
    else if (a < 3600) text = Math.round(a / 60) + " min";
    else if (a < 86400) text = Math.round(a / 3600) + " h";
    else if (a < 45 * 86400) text = Math.round(a / 86400) + " d";
    else return new Date(ms).toLocaleDateString(undefined, { dateStyle: "medium" });
    return s < 0 ? text + " ago" : "in " + text;
  }
  function local(ms) {
    return new Date(ms).toLocaleString(undefined, {
      weekday: "short", year: "numeric", month: "short", day: "numeric",
      hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short",
    });
  }
  function upgrade(root) {
    if (!root.querySelectorAll) return;
    root.querySelectorAll("time.rel[datetime]").forEach(function (t) {
      var ms = Date.parse(t.getAttribute("datetime"));
      if (isNaN(ms)) return;
      if (!t.dataset.utc) {
        t.dataset.utc = t.textContent;
        t.title = local(ms) + " (your time) · " + t.dataset.utc;
      }
      t.textContent = ago(ms);
    });
  }
  upgrade(document);
  document.addEventListener("htmx:load", function (event) { upgrade(event.detail.elt); });
  setInterval(function () { upgrade(document); }, 5000);
})();

// Local time in forms: a datetime-local input with data-tz-from="<minutes east of UTC>" shows
// a time at that offset (the server's rendering: 0 without a `tz`); here it is moved to the
// browser's offset, which goes to the server in the form's [data-tz-field] (`tz`) and in the
// quick-range links ([data-tz-link]: "Today" is the browser's today). Labels say which zone.
(function () {
  var MINUTE = 60000;
  function zone(offset) {
    if (offset === 0) return "UTC";
    var m = Math.abs(offset);
    var pad = function (n) { return (n < 10 ? "0" : "") + n; };
    return "your time, UTC" + (offset < 0 ? "\u2212" : "+") + pad(Math.floor(m / 60)) + ":" + pad(m % 60);
  }
  function upgrade(root) {
    if (!root.querySelectorAll) return;
    var offset = -new Date().getTimezoneOffset();
    root.querySelectorAll("input[data-tz-from]").forEach(function (input) {
      var from = Number(input.dataset.tzFrom) || 0;
      var v = input.value;
      if (v && from !== offset) {
        var wall = Date.parse((v.length === 16 ? v + ":00" : v) + "Z");
        if (!isNaN(wall)) {
          input.value = new Date(wall + (offset - from) * MINUTE).toISOString().slice(0, 16);
        }
      }
      input.dataset.tzFrom = String(offset);
    });
    root.querySelectorAll("[data-tz-field]").forEach(function (f) {
      f.value = offset === 0 ? "" : String(offset);
    });
    root.querySelectorAll("[data-tz-label]").forEach(function (l) {
      l.textContent = "(" + zone(offset) + ")";
    });
    root.querySelectorAll("[data-tz-today]").forEach(function (l) {
      l.textContent = offset === 0 ? " (UTC)" : "";
    });
    root.querySelectorAll("a[data-tz-link]").forEach(function (a) {
      var url = new URL(a.getAttribute("href"), window.location.href);
      if (offset === 0) url.searchParams.delete("tz");
      else url.searchParams.set("tz", String(offset));
      var href = url.pathname + url.search;
      if (a.getAttribute("href") === href) return;
      a.setAttribute("href", href);
      // A boosted link keeps the address it had when htmx took it in: take it in again.
      if (window.htmx) window.htmx.process(a);
    });
  }
  upgrade(document);
  document.addEventListener("htmx:load", function (event) { upgrade(event.detail.elt); });
})();

// Chart values: each bucket of a chart (templates/charts.html) has a hit area whose <title>
// holds its time and values. Hovering one, or moving through them with the arrow keys once
// the chart has the focus, shows that text in the chart's tooltip.
(function () {
  function show(svg, hit) {
    var tip = svg.parentNode.querySelector(".chart-tip");
    svg.querySelectorAll(".hit.on").forEach(function (h) { h.classList.remove("on"); });
    if (!tip) return;
    if (!hit) { tip.hidden = true; return; }
    hit.classList.add("on");
    var title = hit.querySelector("title");
    tip.textContent = title ? title.textContent : "";
    var box = svg.getBoundingClientRect();
    var r = hit.getBoundingClientRect();
    var x = r.left + r.width / 2 - box.left;
    tip.hidden = false;
    var left = Math.max(0, Math.min(x - tip.offsetWidth / 2, box.width - tip.offsetWidth));
    tip.style.left = left + "px";
  }
  document.addEventListener("mouseover", function (e) {
    var hit = e.target.closest && e.target.closest("svg.chart .hit");
    if (hit) show(hit.ownerSVGElement, hit);
  });
  document.addEventListener("mouseout", function (e) {
    var svg = e.target.closest && e.target.closest("svg.chart");
    if (svg && !svg.contains(e.relatedTarget) && document.activeElement !== svg) show(svg, null);
  });
  document.addEventListener("focusin", function (e) {
    var svg = e.target.closest && e.target.closest("svg.chart");
    if (!svg) return;
    var hits = svg.querySelectorAll(".hit");
    show(svg, svg.querySelector(".hit.on") || hits[hits.length - 1]);
  });
  document.addEventListener("focusout", function (e) {
    var svg = e.target.closest && e.target.closest("svg.chart");
    if (svg) show(svg, null);
  });
  document.addEventListener("keydown", function (e) {
    var svg = e.target.closest && e.target.closest("svg.chart");
    if (!svg) return;
    var hits = Array.prototype.slice.call(svg.querySelectorAll(".hit"));
    var i = hits.indexOf(svg.querySelector(".hit.on"));
    var next = { ArrowLeft: i - 1, ArrowRight: i + 1, Home: 0, End: hits.length - 1 }[e.key];
    if (next === undefined) return;
    e.preventDefault();
    show(svg, hits[Math.max(0, Math.min(next, hits.length - 1))]);
  });
})();
