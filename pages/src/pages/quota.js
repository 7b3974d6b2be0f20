import { line, timeChart } from '../charts';
import { fill, h, rows } from '../dom';
import { amount, colour, plotValue, resourceName, sentence, unit, when } from '../format';
import { appendSample } from '../live';
import { usageView } from './usage';

function depth(quota, name) {
  let d = 0;
  let p = (quota[name] || {}).parent;
  while (p && d < 6) {
    d += 1;
    p = (quota[p] || {}).parent;
  }
  return d;
}

// Quota: the tree with use against min and max (team names first), over time; reclaims and preemptions.
export function quota(data, live) {
  const history = (data.history || []).slice();
  let snap = data.snapshot;
  appendSample(history, snap);
  const select = document.getElementById('resource');
  const charts = {};

  function resources() {
    const names = new Set();
    for (const q of Object.values(snap.quota || {})) for (const r of [...Object.keys(q.max || {}), ...Object.keys(q.min || {})]) names.add(r);
    return [...names].sort((a, b) => (a !== 'cpu') - (b !== 'cpu') || a.localeCompare(b));
  }

  function table() {
    const out = [];
    for (const [name, q] of Object.entries(snap.quota || {})) {
      const res = [...new Set([...Object.keys(q.max || {}), ...Object.keys(q.min || {})])].sort();
      for (const r of res) {
        const used = q.used ? q.used[r] || 0 : null;
        const min = q.min[r] || 0;
        const max = q.max[r];
        const borrowed = q.borrowed ? q.borrowed[r] || 0 : 0;
        const lent = q.lent ? q.lent[r] || 0 : 0;
        const atMax = used !== null && max !== undefined && used >= max;
        const over = atMax && used > max ? used - max : 0; // e.g. its max lowered under running work
        const state = over ? 'over-max' : atMax ? 'at-max' : borrowed > 0 ? 'borrowing' : '';
        const top = Math.max(max || 0, used || 0, min, 1e-9);
        const bar = h('div', { class: 'bar', title: used === null ? 'not your team' : `${amount(r, used)} used` });
        if (used !== null) {
          const fillEl = h('span', { class: atMax ? 'full' : borrowed > 0 ? 'over' : '' });
          fillEl.style.width = `${Math.min(100, (100 * used) / top)}%`;
          bar.append(fillEl);
        }
        if (min) {
          const mark = h('i', { title: `guarantee ${amount(r, min)}` });
          mark.style.left = `${Math.min(100, (100 * min) / top)}%`;
          bar.append(mark);
        }
        out.push(h('tr', { class: state, 'data-node': name, 'data-resource': r },
          h('td', {}, q.team || (used === null ? '' : '—')),
          h('td', { class: `depth-${Math.min(depth(snap.quota, name), 4)}` }, h('span', { class: 'tree-name' }, name)),
          h('td', {}, resourceName(r)),
          h('td', { class: 'num' }, used === null ? '·' : amount(r, used)),
          h('td', { class: 'num' }, amount(r, min)),
          h('td', { class: 'num' }, max === undefined ? 'no ceiling' : amount(r, max)),
          h('td', {}, over ? h('span', { class: 'tag over-max' }, `over its max by ${amount(r, over)}`) : '',
            borrowed > 0 ? h('span', { class: 'tag borrowing' }, `borrowing ${amount(r, borrowed)}`) : atMax && !over ? h('span', { class: 'tag at-max' }, 'at ceiling') : ''),
          h('td', {}, lent > 0 ? h('span', { class: 'tag lending' }, `lending ${amount(r, lent)}`) : ''),
          h('td', { class: 'barcol' }, bar)));
      }
    }
    const el = document.getElementById('quota');
    rows(el, out.length ? out : [h('tr', {}, h('td', { colspan: 9 }, 'There is no quota tree: every namespace is on its own, bounded only by the cluster and its ResourceQuota.'))]);
    // the quota-node column sticks right after the team column (pages.css): exactly its width, no gap
    const first = el.querySelector('thead th');
    if (first) el.style.setProperty('--sticky-left', `${first.getBoundingClientRect().width}px`);
  }

  function plots() {
    const res = select.value || 'cpu';
    const box = document.getElementById('quota-charts');
    for (const [name, q] of Object.entries(snap.quota || {})) {
      if (q.used === null || (q.max[res] === undefined && q.min[res] === undefined)) continue;
      const label = q.team ? `${q.team} (${name})` : name;
      const sets = [
        line('used', history.map(s => ({ x: s.time, y: plotValue(res, (((s.quota || {})[name] || {}).used || {})[res] || 0) })), colour(q.team || name), { fill: 'origin', backgroundColor: colour(q.team || name) + '55' }),
        line('min (guarantee)', history.map(s => ({ x: s.time, y: plotValue(res, (((s.quota || {})[name] || {}).min || {})[res] ?? 0) })), '#1a7f37', { borderDash: [4, 3] }),
        line('max (ceiling)', history.map(s => ({ x: s.time, y: plotValue(res, (((s.quota || {})[name] || {}).max || {})[res] ?? null) })), '#cf222e', { borderDash: [8, 4] }),
        line('borrowed', history.map(s => ({ x: s.time, y: plotValue(res, ((((s.quota || {})[name] || {}).borrowed) || {})[res] || 0) })), '#d29922'),
        line('lent', history.map(s => ({ x: s.time, y: plotValue(res, ((((s.quota || {})[name] || {}).lent) || {})[res] || 0) })), '#0969da')
      ];
      const key = `${name}|${res}`;
      if (!charts[key]) {
        const canvas = h('canvas', { role: 'img', 'aria-label': `${label}: ${resourceName(res)} used against min and max` });
        const fig = h('figure', { class: 'chart', 'data-node': name, 'data-resource': res },
          h('figcaption', {}, `${label}: ${resourceName(res)}`), h('div', { class: 'plot small' }, canvas));
        box.append(fig);
        charts[key] = timeChart(canvas, sets, { yTitle: unit(res) });
      } else {
        charts[key].data.datasets = sets;
        charts[key].update();
      }
    }
    for (const fig of box.querySelectorAll('figure')) fig.hidden = fig.dataset.resource !== res;
  }

  function evictions(list) {
    rows(document.getElementById('evictions'), list.length ? list.map(e => h('tr', {},
      h('td', {}, when(e.time)), h('td', {}, e.kind === 'reclaimed' ? 'reclaim' : 'preemption'),
      // another team's victim comes without its person and server (the service's rule): its kind and team
      h('td', {}, e.victim.said || `${e.victim.team || e.victim.namespace}: ${e.victim.user}'s ${e.victim.kind} ${e.victim.name}`),
      h('td', {}, e.preemptor), h('td', {}, sentence(e.message))))
      : [h('tr', {}, h('td', { colspan: 5 }, 'Nobody has been stopped to make room.'))]);
  }

  fill(select, resources().map(r => h('option', { value: r }, resourceName(r))));
  select.addEventListener('change', plots);
  fill(document.getElementById('warnings'), (data.warnings || []).map(w => h('p', { class: 'notice warn' }, w)));
  table();
  plots();
  const log = (data.evictions || []).slice();
  evictions(log);
  usageView(data);
  live.on('sample', sample => {
    snap = sample;
    appendSample(history, sample);
    table();
    plots();
  });
  live.on('workload', w => {
    if (['Preempted'].includes(w.state) || (w.pods || []).some(p => ['preempted', 'reclaimed'].includes(p.reason))) {
      const pod = (w.pods || []).find(p => ['preempted', 'reclaimed'].includes(p.reason)) || {};
      const key = `${w.id}|${pod.message || w.message}`;
      if (!log.some(e => `${e.victim.workload}|${e.message}` === key) && (pod.message || w.message)) {
        log.unshift({ time: Date.now() / 1000, kind: pod.reason || 'preempted', message: pod.message || w.message,
          preemptor: (pod.details || {}).preemptor || '', victim: { workload: w.id, name: w.name, kind: w.kind, user: w.user, team: w.tenant, namespace: w.namespace } });
        evictions(log);
      }
    }
  });
}
