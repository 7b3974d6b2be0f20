import { barChart, line, timeChart } from '../charts';
import { fill, h, rows } from '../dom';
import { finishedAt, requests, startedAt, stateWord, when, why } from '../format';
import { appendSample } from '../live';
import { cancelWorkload, cancellable, serverButtons } from './common';

const BUCKETS = [[10, '< 10 s'], [60, '10 s – 1 min'], [300, '1 – 5 min'], [1800, '5 – 30 min'], [7200, '30 min – 2 h'], [Infinity, '> 2 h']];

function histogram(values) {
  const counts = BUCKETS.map(() => 0);
  for (const v of values) counts[BUCKETS.findIndex(([top]) => v < top)] += 1;
  return counts;
}

// Jobs: counts, queued and running over time, wait and run time distributions, and the list (live).
export function jobs(data, live) {
  const history = (data.history || []).slice();
  appendSample(history, data.snapshot);
  const byId = new Map((data.workloads || []).map(w => [w.id, w]));
  const filter = document.getElementById('kind-filter');
  let jobsChart = null;
  let waitChart = null;
  let runChart = null;

  function all() {
    return [...byId.values()].sort((a, b) => b.created - a.created || (a.id < b.id ? 1 : -1));
  }

  // Queued and running as the chart's latest point (the same sample), so tile and chart agree; a user's
  // sample holds every team's totals (the pages' one rule), their own list only their own work.
  const total = (s, k) => Object.values((s && s.jobs) || {}).reduce((a, c) => a + (c[k] || 0), 0);

  function counts(list) {
    const training = list.filter(w => w.kind === 'training');
    const n = s => training.filter(w => s.includes(w.state)).length;
    const cannot = training.filter(w => w.state === 'Pending' && w.reason === 'inadmissible').length;
    const latest = history[history.length - 1];
    const scope = data.admin ? '' : ' in all teams';
    const cards = [
      ['queued', total(latest, 'queued'), (cannot ? `${cannot} of them cannot start as asked` : 'waiting for room') + scope
        + (data.admin ? '' : `; ${n(['Pending'])} yours`)],
      ['running', total(latest, 'running'), `admitted and running${scope}` + (data.admin ? '' : `; ${n(['Running'])} yours`)],
      ['finished', n(['Succeeded']), 'ended well'],
      ['ended otherwise', n(['Failed', 'Cancelled', 'Rejected', 'Preempted', 'Quarantined']), 'failed, cancelled or refused']
    ];
    fill(document.getElementById('counts'), cards.map(([title, value, sub]) =>
      h('div', { class: 'card', 'data-count': title }, h('h3', {}, title), h('div', { class: 'big' }, value), h('div', { class: 'sub' }, sub))));
  }

  function distributions(list) {
    const training = list.filter(w => w.kind === 'training');
    const waits = training.map(w => [w, startedAt(w)]).filter(([, s]) => s).map(([w, s]) => s - w.created);
    const runs = training.filter(w => ['Succeeded', 'Failed'].includes(w.state))
      .map(w => [startedAt(w), finishedAt(w)]).filter(([s, f]) => s && f).map(([s, f]) => f - s);
    const labels = BUCKETS.map(b => b[1]);
    const wait = [{ label: 'jobs', data: histogram(waits), backgroundColor: '#e8833a' }];
    const run = [{ label: 'jobs', data: histogram(runs), backgroundColor: '#4a90d9' }];
    if (!waitChart) {
      waitChart = barChart(document.getElementById('wait-chart'), labels, wait, { yTitle: 'jobs' });
      runChart = barChart(document.getElementById('run-chart'), labels, run, { yTitle: 'jobs' });
    } else {
      waitChart.data.datasets = wait;
      runChart.data.datasets = run;
      waitChart.update();
      runChart.update();
    }
  }

  function overTime() {
    const sum = total;
    const latest = history[history.length - 1];
    document.getElementById('jobs-chart').setAttribute('aria-label', 'Training jobs queued and running over time: now '
      + `${total(latest, 'queued')} queued, ${total(latest, 'running')} running`);
    const sets = [
      line('queued', history.map(s => ({ x: s.time, y: sum(s, 'queued') })), '#e8833a'),
      line('running', history.map(s => ({ x: s.time, y: sum(s, 'running') })), '#1a7f37')
    ];
    if (!jobsChart) jobsChart = timeChart(document.getElementById('jobs-chart'), sets, { yTitle: 'jobs' });
    else {
      jobsChart.data.datasets = sets;
      jobsChart.update();
    }
  }

  // A named server can be deleted from its newest row only (older rows are its earlier runs), and not
  // again once deleted from here.
  const deleted = new Set();
  function actions(w, newest) {
    if (cancellable(w, data)) {
      return h('button', { type: 'button', class: 'cancel small', onclick: () => cancelWorkload(data, w, done) }, 'Cancel…');
    }
    const server = w.serverName || '';
    const buttons = serverButtons(w, data, answer => {
      if (answer && answer.removed) deleted.add(answer.server);
      render();
    }, newest.get(server) === w.id && !deleted.has(server));
    return buttons.length ? buttons : '';
  }

  function table(list) {
    const kind = filter.value;
    const now = Date.now() / 1000;
    const shown = list.filter(w => !kind || w.kind === kind);
    const newest = new Map();
    for (const w of list) if (w.kind === 'notebook' && w.user === data.user && !newest.has(w.serverName || '')) newest.set(w.serverName || '', w.id);
    rows(document.getElementById('jobs'), shown.length ? shown.map(w => h('tr', { 'data-id': w.id, 'data-state': w.state },
      h('td', {}, w.tenant || w.namespace),
      h('td', {}, h('a', { href: `${data.prefix}jobs/${w.id}` }, w.name), ' ', h('span', { class: 'tree-name' }, w.id)),
      h('td', {}, w.user),
      h('td', { class: `state-${w.state}` }, stateWord(w.state, w.reason)),
      h('td', {}, why(w, now)),
      h('td', {}, w.priorityClassName || ''),
      h('td', {}, requests(w)),
      h('td', {}, when(w.created)),
      h('td', { class: 'actions' }, actions(w, newest)))) : [h('tr', {}, h('td', { colspan: 9 }, kind ? `No ${filter.selectedOptions[0].text} yet.` : 'Nothing yet.'))]);
  }

  // The API's answer to a cancel is the workload as it is now: shown at once, the stream confirms it.
  function done(view) {
    if (view && view.id) byId.set(view.id, view);
    render();
  }

  function render() {
    const list = all();
    counts(list);
    distributions(list);
    table(list);
  }

  filter.addEventListener('change', render);
  render();
  overTime();
  live.on('workload', w => {
    byId.set(w.id, w);
    render();
  });
  live.on('sample', sample => {
    appendSample(history, sample);
    overTime();
    counts(all());
  });
}
