// The portal's landing page: moves the portal token from the link's fragment (#token=…) into
// the page's form and posts it, so the server sets the HttpOnly portal cookie. The fragment is
// taken out of the address bar and history first; browsers never send it to a server. Without
// a token, a browser with a portal session open goes on to its application.
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
  form.elements.token.value = decodeURIComponent(match[1]);
  form.submit();
})();
