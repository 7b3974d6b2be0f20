import { area, line, timeChart } from '../charts';
import { fill, h, rows } from '../dom';
import { amount, resourceName, unit } from '../format';
import { appendSample } from '../live';
import { chartBox, points, resourcesOf, teamsIn, warnings } from './common';

// Cluster: capacity, allocated (by team) and waiting demand per resource, now and over time.
export function cluster(data, live) {
  const history = (data.history || []).slice();
  let snap = data.snapshot;
  appendSample(history, snap);
  warnings(data);
  const charts = {};

  // The quota tree's root: its ceiling binds before the nodes' capacity when it is lower (or full).
  function root(s) {
    const entry = Object.entries((s && s.quota) || {}).find(([, q]) => !q.parent);
    return entry ? { name: entry[0], ...entry[1] } : null;
  }

  function ceilingLine(res) {
    const r = root(snap);
    const max = r && r.max ? r.max[res] : undefined;
    if (max === undefined) return null;
    const used = (r.used || {})[res] || 0;
    const full = used >= max;
    const text = full
      ? `The quota ${r.name} allows at most ${amount(res, max)}, all in use: new work waits for quota, not for nodes.`
      : `The quota ${r.name} allows at most ${amount(res, max)}; ${amount(res, max - used)} of it left.`;
    return h('div', { class: full ? 'ceiling binds' : 'ceiling' }, text);
  }

  function cards() {
    const c = snap.cluster;
    fill(document.getElementById('cards'), resourcesOf(snap).map(res => {
      const cap = c.capacity[res] || 0;
      const alloc = c.allocated[res] || 0;
      const pct = cap ? Math.round((100 * alloc) / cap) : 0;
      return h('div', { class: 'card', 'data-resource': res },
        h('h3', {}, resourceName(res)),
        h('div', { class: 'big' }, `${amount(res, alloc)} of ${amount(res, cap)}`),
        h('div', { class: 'sub' }, `${pct}% allocated · ${amount(res, c.pending[res] || 0)} waiting`),
        ceilingLine(res));
    }));
  }

  function datasets(res) {
    const teams = teamsIn(history);
    return [
      ...teams.map((t, i) => area(t, points(history, s => (s.teams[t] || {})[res] || 0, res), i)),
      line('capacity', points(history, s => s.cluster.capacity[res] || 0, res), '#1f2328', { stack: 'capacity' }),
      ...(root(snap) && (root(snap).max || {})[res] !== undefined
        ? [line('quota ceiling (root max)', points(history, s => ((root(s) || {}).max || {})[res] ?? null, res), '#8250df',
          { stack: 'ceiling', borderDash: [8, 4] })]
        : []),
      line('waiting', points(history, s => s.cluster.pending[res] || 0, res), '#cf222e',
        { stack: 'waiting', borderDash: [6, 4] })
    ];
  }

  function plots() {
    const box = document.getElementById('charts');
    for (const res of resourcesOf(snap)) {
      if (!charts[res]) {
        const { box: fig, canvas } = chartBox(`${resourceName(res)}: allocated by team, capacity, the quota ceiling and waiting demand`, `chart-${res}`);
        box.append(fig);
        charts[res] = timeChart(canvas, datasets(res), { stacked: true, yTitle: unit(res) });
      } else {
        charts[res].data.datasets = datasets(res);
        charts[res].update();
      }
    }
  }

  function teams() {
    const table = document.getElementById('teams');
    const res = resourcesOf(snap);
    fill(table.tHead.rows[0], h('th', {}, 'team'), res.map(r => h('th', { class: 'num' }, `${resourceName(r)} allocated`)));
    const names = Object.keys(snap.teams || {}).sort((a, b) => (a === 'other teams') - (b === 'other teams') || a.localeCompare(b));
    rows(table, names.length
      ? names.map(t => h('tr', { 'data-team': t }, h('th', { scope: 'row' }, t),
        res.map(r => h('td', { class: 'num' }, amount(r, (snap.teams[t] || {})[r] || 0)))))
      : [h('tr', {}, h('td', { colspan: res.length + 1 }, 'Nothing runs now.'))]);
  }

  function render() {
    cards();
    plots();
    teams();
  }

  render();
  live.on('sample', sample => {
    snap = sample;
    appendSample(history, sample);
    render();
  });
}
