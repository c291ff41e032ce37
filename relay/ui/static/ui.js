// acrelay live view: on each invalidation from the live stream, re-fetch
// the server-rendered fragment (escaped by html/template) and swap it in;
// tick the claim countdowns every second. Event data is never assigned as
// HTML here: the fragment is parsed by DOMParser (inert: no script runs,
// nothing loads) and its nodes adopted; text is set with textContent.
(function () {
  'use strict';
  var root = document.getElementById('live');
  var status = document.getElementById('live-status');
  if (!root || !root.dataset.fragment) { return; }
  var fragmentURL = root.dataset.fragment, liveURL = root.dataset.live, signinURL = root.dataset.signin;
  var busy = false, again = false;

  function setStatus(text, live) {
    if (!status) { return; }
    status.textContent = text;
    status.classList.toggle('live', !!live);
  }

  function remaining(ms) {
    if (ms <= 0) { return 'expired'; }
    var s = Math.round(ms / 1000), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    s = s % 60;
    if (h > 0) { return 'in ' + h + 'h ' + m + 'm'; }
    if (m > 0) { return 'in ' + m + 'm ' + s + 's'; }
    return 'in ' + s + 's';
  }

  function tick() {
    var now = Date.now();
    var els = root.querySelectorAll('time.countdown');
    for (var i = 0; i < els.length; i++) {
      var ms = Date.parse(els[i].getAttribute('datetime')) - now;
      els[i].textContent = remaining(ms);
      els[i].classList.toggle('expired', ms <= 0);
    }
  }

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(fragmentURL, { credentials: 'same-origin', cache: 'no-store', headers: { 'Accept': 'text/html' } })
      .then(function (res) {
        if (res.status === 401) { window.location.assign(signinURL); throw new Error('signed out'); }
        if (!res.ok) { throw new Error('fragment ' + res.status); }
        return res.text();
      })
      .then(function (text) {
        var doc = new DOMParser().parseFromString(text, 'text/html');
        var next = doc.getElementById('live');
        if (!next) { throw new Error('fragment without #live'); }
        var nodes = [];
        while (next.firstChild) { nodes.push(document.adoptNode(next.firstChild)); }
        root.replaceChildren.apply(root, nodes);
        tick();
        root.dispatchEvent(new CustomEvent('acrelay:refreshed'));
      })
      .catch(function (err) { setStatus('Live updates: ' + err.message, false); })
      .finally(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }

  tick();
  window.setInterval(tick, 1000);
  if (window.EventSource && liveURL) {
    var es = new EventSource(liveURL);
    var opened = false;
    es.addEventListener('open', function () {
      setStatus('Live updates: on', true);
      if (opened) { refresh(); } // what changed while reconnecting
      opened = true;
    });
    es.addEventListener('error', function () { setStatus('Live updates: reconnecting…', false); });
    es.addEventListener('invalidate', refresh);
  } else {
    setStatus('Live updates: unavailable in this browser (reload to refresh)', false);
  }
})();
