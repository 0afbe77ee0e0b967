// The portal's landing page: moves the portal token from the link's fragment (#token=…) into
// the page's form and posts it, so the server sets the HttpOnly portal cookie. The fragment is
// taken out of the address bar and history first; browsers never send it to a server. Without
// a token, a browser with a portal session open goes on to its application.
//
// Inside a frame, the page first checks that the browser keeps the portal's cookie there (a
// frame on another site over plain http cannot keep a SameSite=Lax cookie): if not, it says
// so and offers the link in a new tab, instead of spending the link on a session the browser
// would drop ("this link is not valid").
(function () {
  var match = /(?:^#|&)token=([^&]+)/.exec(window.location.hash);
  window.history.replaceState(null, "", window.location.pathname);
  var form = document.getElementById("portal-open");
  if (!match && form && form.dataset.home) {
    window.location.replace(form.dataset.home);
    return;
  }
  if (!match || !form) {
    var missing = document.getElementById("portal-missing");
    if (missing) missing.hidden = false;
    return;
  }
  var token = decodeURIComponent(match[1]);
  var framed = window.top !== window.self;
  function open() {
    form.elements.token.value = token;
    form.submit();
  }
  function cannotKeep() {
    var box = document.getElementById(framed ? "portal-framed" : "portal-no-cookies");
    var link = document.getElementById("portal-new-tab");
    if (framed && link) {
      link.href = window.location.pathname + "#token=" + encodeURIComponent(token);
    }
    if (box) box.hidden = false;
  }
  if (!navigator.cookieEnabled) return cannotKeep();
  if (!framed || !form.dataset.check || !window.fetch) return open();
  var check = function () {
    return fetch(form.dataset.check, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.json(); });
  };
  // The first answer sets the probe cookie; the second says whether it came back.
  check().then(check).then(
    function (answer) { if (answer.kept) open(); else cannotKeep(); },
    open);
})();
