// The hub's waiting page, while the tenancy scheduler holds the server: why it waits, its place in the
// queue, how long it may wait (from the waits seen), what the user can do and a link to the dashboard,
// from the spawner's progress events (their "tenancy" field). Text only (textContent); the stock page keeps its own handling of ready and failed.
(function () {
  'use strict';
  var box = document.getElementById('tenancy-status');
  if (!box || !window.EventSource) return;
  function set(sel, text) {
    var el = box.querySelector(sel);
    if (el) el.textContent = text || '';
  }
  var source = new EventSource(box.dataset.progressUrl);
  source.onmessage = function (e) {
    var evt;
    try { evt = JSON.parse(e.data); } catch (err) { return; }
    var t = evt.tenancy;
    if (evt.failed) {
      box.className = 'tenancy-status text-start failed';
      set('.tenancy-state', 'The server could not start.');
      set('.tenancy-reason', evt.message || '');
      set('.tenancy-position', '');
      set('.tenancy-estimate', '');
      box.querySelector('.tenancy-todo').replaceChildren();
      source.close();
      return;
    }
    if (evt.ready) { source.close(); return; }
    if (!t) return;
    box.className = 'tenancy-status text-start' + (t.state === 'starting' ? ' starting' : '');
    set('.tenancy-state', t.headline);
    set('.tenancy-reason', t.reason);
    set('.tenancy-position', t.position);
    set('.tenancy-estimate', t.estimate);
    var list = box.querySelector('.tenancy-todo');
    list.replaceChildren();
    (t.todo || []).forEach(function (line) {
      // A line is a sentence, or {text, links: [{href, text}]}: a sentence with where to act on it.
      var li = document.createElement('li');
      li.textContent = typeof line === 'string' ? line : line.text;
      ((line && line.links) || []).forEach(function (link, i) {
        li.appendChild(document.createTextNode(i ? ', ' : ' '));
        var a = document.createElement('a');
        a.href = link.href;
        a.textContent = link.text;
        li.appendChild(a);
      });
      list.appendChild(li);
    });
    window.tenancyWaitingUpdates = (window.tenancyWaitingUpdates || 0) + 1;
  };
})();
