import { fill, h } from '../dom';
import { amount, resourceName, sentence } from '../format';
import { api } from '../live';
import { idle, share, wait } from './usage';

const count = n => (n === null || n === undefined ? '—' : String(n));
const perResource = v => {
  const parts = Object.entries(v || {}).filter(([, x]) => x).map(([r, x]) => `${resourceName(r)} ${amount(r, x)}`);
  return parts.join(', ') || 'none';
};
const percent = v => Object.entries(v || {}).map(([r, x]) => `${resourceName(r)} ${share(x)}`).join(', ') || '—';
const idleHours = v => Object.entries(v || {}).map(([r, x]) => idle(r, x)).join(', ') || 'none';

// What `tenancy whatif` measures, in people's words (its keys are the API's contract, not the page's).
const TEAM = [
  ['median wait', 'wait_p50_s', wait],
  ['95th percentile wait', 'wait_p95_s', wait],
  ['its work stopped', 'evictions_suffered', count],
  ["stopped others' work", 'evictions_caused', count],
  ['borrowed (resource-hours)', 'borrowed_hours', perResource],
  ['lent to others (resource-hours)', 'lent_hours', perResource],
  ['below its guarantee while others borrowed', 'below_guarantee_s', wait],
  ['never started', 'never_started', count]
];
const CLUSTER = [
  ['share of capacity used', 'utilisation', percent],
  ['idle', 'idle_hours', idleHours]
];

// The tree editor's "Compare with last week": the service replays its own recorded week under the tree in
// force and under the tree being edited (POST api/v1/whatif?since=7d), and the page shows both side by side.
export function comparison(data) {
  const out = document.getElementById('comparison');
  const button = document.getElementById('compare');
  const teamsOf = leaf => (data.tenants || []).filter(t => t.leaf === leaf).map(t => t.group);

  function block(title, key, current, proposed, lines) {
    return lines.map(([label, field, fmt], i) => {
      const cur = current ? fmt(current[field]) : 'no such team';
      const neu = proposed ? fmt(proposed[field]) : 'no such team';
      return h('tr', { 'data-team': key, 'data-measure': field, class: cur === neu ? '' : 'differs' },
        i === 0 ? h('th', { rowspan: lines.length }, title) : null,
        h('td', {}, label), h('td', {}, cur), h('td', {}, neu));
    });
  }

  function show(answer) {
    const body = [];
    for (const row of answer.rows || []) {
      if (row.scope === 'team') {
        const groups = teamsOf(row.name);
        body.push(...block(groups.length ? `${groups.join(', ')} (${row.name})` : row.name, row.name, row.current,
          row.proposed, TEAM));
      } else {
        body.push(...block('whole cluster', 'cluster', row.current, row.proposed, CLUSTER));
      }
    }
    fill(out, h('section', { id: 'compare-result' },
      h('h3', {}, 'The last 7 days under the tree in force and under yours'),
      h('p', {}, 'The work the service recorded in the last 7 days, replayed with the same arrivals and run times ' +
        'under the tree in force (with any change made during the week, from when it was made) and under yours. ' +
        'Rows that differ are in bold.'),
      h('div', { class: 'scroll' }, h('table', { id: 'compare-table' },
        h('thead', {}, h('tr', {}, h('th', {}, 'team'), h('th', {}, 'measure'), h('th', {}, 'tree in force'),
          h('th', {}, 'your tree'))),
        h('tbody', {}, body)))));
  }

  async function compare(manifest) {
    button.disabled = true;
    fill(out, h('p', {}, 'Replaying the last 7 days under both trees…'));
    try {
      show(await api(data.prefix, 'whatif?since=7d', { method: 'POST', body: JSON.stringify(manifest) }));
    } catch (err) {
      fill(out, h('p', { class: 'notice bad', id: 'compare-error', role: 'alert' },
        err.status === 400 ? `This tree is not valid: ${err.message}`
          : err.status === 404 ? 'Nothing was recorded in the last 7 days, so there is nothing to compare.'
            : `The comparison failed: ${sentence(err.message)}`));
    } finally {
      button.disabled = false;
    }
  }

  return { compare, clear: () => fill(out) };
}
