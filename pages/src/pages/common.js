import { h, fill } from '../dom';
import { plotValue } from '../format';

export function warnings(data) {
  const box = document.getElementById('warnings');
  if (!box) return;
  fill(box, (data.warnings || []).map(w => h('p', { class: 'notice warn' }, w)));
}

// Every resource named in the samples' cluster capacity, CPU first.
export function resourcesOf(snapshot) {
  const order = ['cpu', 'memory', 'nvidia.com/gpu'];
  const names = Object.keys((snapshot && snapshot.cluster && snapshot.cluster.capacity) || {});
  return names.sort((a, b) => (order.indexOf(a) + 1 || 99) - (order.indexOf(b) + 1 || 99) || a.localeCompare(b));
}

export function points(history, pick, res) {
  return history.map(s => ({ x: s.time, y: plotValue(res, pick(s)) ?? 0 }));
}

export function teamsIn(history, key = 'teams') {
  const names = new Set();
  for (const s of history) for (const t of Object.keys(s[key] || {})) names.add(t);
  return [...names].sort((a, b) => (a === 'other teams') - (b === 'other teams') || a.localeCompare(b));
}

export function chartBox(title, id) {
  const canvas = h('canvas', { id, role: 'img', 'aria-label': title });
  return { box: h('figure', { class: 'chart' }, h('figcaption', {}, title), h('div', { class: 'plot' }, canvas)), canvas };
}
