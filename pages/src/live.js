// The one model of a page: its first data from the template, then the service's event stream.
// Views subscribe and re-render; nothing polls on a timer.
export class Live {
  constructor(data) {
    this.data = data;
    this.listeners = { sample: [], workload: [] };
    this.status = document.getElementById('live');
  }

  on(type, fn) {
    this.listeners[type].push(fn);
  }

  connect() {
    const url = `${this.data.prefix}api/v1/events?samples=true&_xsrf=${encodeURIComponent(xsrf() || this.data.xsrf || '')}`;
    const source = new EventSource(url);
    source.onopen = () => this.say('live', 'on', 'Connected: this page updates by itself.');
    source.onerror = () => this.say('reconnecting…', 'off', 'The connection to the tenancy service was lost; retrying.');
    source.onmessage = e => {
      let msg;
      try {
        msg = JSON.parse(e.data);
      } catch (err) {
        return;
      }
      if (msg.type === 'sample' && msg.sample) {
        window.tenancyUpdates = (window.tenancyUpdates || 0) + 1;
        for (const fn of this.listeners.sample) fn(msg.sample);
      } else if (msg.type === 'workload' && msg.workload) {
        window.tenancyUpdates = (window.tenancyUpdates || 0) + 1;
        for (const fn of this.listeners.workload) fn(msg.workload);
      }
    };
    this.source = source;
  }

  say(text, cls, title) {
    if (!this.status) return;
    this.status.textContent = text;
    this.status.className = `live ${cls}`;
    this.status.title = title;
  }
}

// Keep a history of samples: stored ones first, then live ones as they come (bounded).
export function appendSample(history, sample, most = 2000) {
  if (!history.length || sample.time > history[history.length - 1].time) history.push(sample);
  else history[history.length - 1] = sample;
  if (history.length > most) history.splice(0, history.length - most);
}

let XSRF = '';
export function setXsrf(token) {
  XSRF = token || '';
}

// The session's XSRF token as it is now: the service's _xsrf cookie (its raw value is the token; a page
// opened later in another tab may have renewed it), else the one this page was served with.
export function xsrf() {
  const cookie = document.cookie.split('; ').find(c => c.startsWith('_xsrf='));
  return cookie ? decodeURIComponent(cookie.slice(6)) : XSRF;
}

export async function api(prefix, path, options = {}) {
  const r = await fetch(`${prefix}api/v1/${path}`, {
    credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', 'X-XSRFToken': xsrf() },
    ...options
  });
  const text = await r.text();
  let body = text;
  try {
    body = JSON.parse(text);
  } catch (err) {
    /* logs are text */
  }
  if (!r.ok) {
    const message = (body && body.error) || `the service answered ${r.status}`;
    const e = new Error(message);
    e.status = r.status;
    throw e;
  }
  return body;
}
