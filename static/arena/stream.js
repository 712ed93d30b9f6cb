// A live battle: both answers arrive as server-sent events, already paced by the server (one common
// pace, nothing until both have started). While they stream the panes hold plain text (textContent,
// never markup); at the end both are replaced by the server's sanitised rendering, and the vote opens.
(function () {
  var root = document.querySelector(".battle[data-stream]");
  if (!root || !window.EventSource) return;
  var panes = [document.querySelector("#pane-A .md"), document.querySelector("#pane-B .md")];
  var status = document.getElementById("stream-status");
  var source = new EventSource(root.getAttribute("data-stream"));
  source.addEventListener("frame", function (event) {
    var data = JSON.parse(event.data);
    var texts = [data.a, data.b];
    for (var i = 0; i < 2; i++) {
      if (data.reset) panes[i].textContent = texts[i];
      else if (texts[i]) panes[i].appendChild(document.createTextNode(texts[i]));
    }
  });
  source.addEventListener("complete", function (event) {
    source.close();
    var data = JSON.parse(event.data);
    panes[0].innerHTML = data.a;  // sanitised on the server (battles/rendering.py), as on a loaded page
    panes[1].innerHTML = data.b;
    root.classList.remove("streaming");
    root.setAttribute("data-status", "ready");
    document.querySelectorAll("#vote-form button, #continue-form textarea, #continue-form button").forEach(
      function (b) { b.disabled = false; }
    );
    if (status) status.textContent = "Both answers are complete. Which is better?";
  });
  source.addEventListener("void", function () {
    source.close();
    window.location.reload();  // the page says why the battle was voided
  });
})();
