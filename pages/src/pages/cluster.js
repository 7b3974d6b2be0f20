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

  function cards() {
    const c = snap.cluster;
    fill(document.getElementById('cards'), resourcesOf(snap).map(res => {
      const cap = c.capacity[res] || 0;
      const alloc = c.allocated[res] || 0;
      const pct = cap ? Math.round((100 * alloc) / cap) : 0;
      return h('div', { class: 'card', 'data-resource': res },
        h('h3', {}, resourceName(res)),
        h('div', { class: 'big' }, `${amount(res, alloc)} of ${amount(res, cap)}`),
        h('div', { class: 'sub' }, `${pct}% allocated · ${amount(res, c.pending[res] || 0)} waiting`));
    }));
  }

  function datasets(res) {
    const teams = teamsIn(history);
    return [
      ...teams.map((t, i) => area(t, points(history, s => (s.teams[t] || {})[res] || 0, res), i)),
      line('capacity', points(history, s => s.cluster.capacity[res] || 0, res), '#1f2328', { stack: 'capacity' }),
      line('waiting', points(history, s => s.cluster.pending[res] || 0, res), '#cf222e',
        { stack: 'waiting', borderDash: [6, 4] })
    ];
  }

  function plots() {
    const box = document.getElementById('charts');
    for (const res of resourcesOf(snap)) {
      if (!charts[res]) {
        const { box: fig, canvas } = chartBox(`${resourceName(res)}: allocated by team, capacity and waiting demand`, `chart-${res}`);
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
