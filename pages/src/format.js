// Words and numbers for people.
const NAMES = { cpu: 'CPU', memory: 'memory', 'nvidia.com/gpu': 'GPU', pods: 'pods' };

export function resourceName(res) {
  return NAMES[res] || res;
}

// Base units (cores, bytes, devices) as people read them.
export function amount(res, value) {
  if (value === null || value === undefined) return '—';
  if (res === 'memory' || res.endsWith('storage') || res.endsWith('.memory')) {
    const gi = value / 1024 ** 3;
    return gi >= 1 || value === 0 ? `${trim(gi)} GiB` : `${trim(value / 1024 ** 2)} MiB`;
  }
  return trim(value);
}

// For chart axes: memory in GiB, everything else as is.
export function plotValue(res, value) {
  if (value === null || value === undefined) return null;
  return res === 'memory' || res.endsWith('storage') ? value / 1024 ** 3 : value;
}

export function unit(res) {
  if (res === 'memory' || res.endsWith('storage')) return 'GiB';
  if (res === 'cpu') return 'cores';
  if (res === 'nvidia.com/gpu') return 'GPUs';
  return '';
}

export function trim(v) {
  return String(Math.round(v * 100) / 100);
}

export function clock(epoch) {
  const d = new Date(epoch * 1000);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map(n => String(n).padStart(2, '0')).join(':');
}

export function when(epoch) {
  if (!epoch) return '—';
  const d = new Date(epoch * 1000);
  const today = new Date();
  const day = d.toDateString() === today.toDateString() ? '' : `${d.toISOString().slice(0, 10)} `;
  return day + clock(epoch);
}

export function duration(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

export function requests(w) {
  const req = (w.resources && w.resources.requests) || {};
  const parts = Object.entries(req).map(([r, v]) => `${resourceName(r)} ${v}`);
  const n = w.replicas || 1;
  return (n > 1 ? `${n} × ` : '') + (parts.join(', ') || '—');
}

export function startedAt(w) {
  const s = (w.pods || []).map(p => p.startedAt).filter(t => typeof t === 'number');
  return s.length ? Math.min(...s) : null;
}

export function finishedAt(w) {
  const f = (w.pods || []).map(p => p.finishedAt).filter(t => typeof t === 'number');
  return w.finished || (f.length ? Math.max(...f) : null);
}

const STATES = { Pending: 'queued', Running: 'running', Succeeded: 'done', Failed: 'failed', Cancelled: 'cancelled',
  Stopped: 'stopped', Preempted: 'stopped to make room', Rejected: 'refused', Quarantined: 'set aside' };

export function stateWord(w) {
  if (w.state === 'Pending' && w.reason === 'inadmissible') return 'cannot start';
  return STATES[w.state] || String(w.state).toLowerCase();
}

export function sentence(text) {
  const t = String(text || '').trim();
  if (!t) return '';
  const first = t[0].toUpperCase() + t.slice(1);
  return /[.!?)]$/.test(first) ? first : `${first}.`;
}

// Why it waits, or when it ran, in one line.
export function why(w, now) {
  if (w.state === 'Pending') {
    const pos = w.position ? ` Position ${w.position} in the queue, ${w.leafPosition} in its team.` : '';
    return sentence(w.message || 'Queued: the scheduler looks at it in a moment') + pos;
  }
  const start = startedAt(w);
  if (w.state === 'Running') return start ? `Running for ${duration(now - start)}.` : 'Running.';
  const end = finishedAt(w);
  if (start && end) return `Ran ${duration(end - start)}, ended ${when(end)}. ${sentence(w.message || '')}`.trim();
  return sentence(w.message || '');
}

// One colour per team (or node) for the whole page: given in the order names are first drawn.
const PALETTE = ['#4a90d9', '#e8833a', '#3fa34d', '#b55fd6', '#d9534f', '#17a2b8', '#8d6e63', '#c2a200', '#5c6bc0', '#26a69a'];
const GIVEN = new Map();
export function colour(name) {
  if (name === 'other teams') return '#9aa4ae';
  if (!GIVEN.has(name)) GIVEN.set(name, PALETTE[GIVEN.size % PALETTE.length]);
  return GIVEN.get(name);
}
