// The dashboard's only script: an opt-in reload every 30 seconds,
// remembered in this browser. Pages work without it.
(function () {
  "use strict";
  var box = document.getElementById("refresh");
  if (!box) { return; }
  var on = false;
  try { on = window.localStorage.getItem("jobhost-refresh") === "1"; } catch (e) { on = false; }
  box.checked = on;
  var timer = null;
  function arm() {
    if (timer) { window.clearTimeout(timer); timer = null; }
    if (box.checked) { timer = window.setTimeout(function () { window.location.reload(); }, 30000); }
  }
  box.addEventListener("change", function () {
    try { window.localStorage.setItem("jobhost-refresh", box.checked ? "1" : "0"); } catch (e) { /* private mode */ }
    arm();
  });
  arm();
})();
