import { fill, h, rows } from '../dom';
import { finishedAt, requests, sentence, startedAt, stateWord, when, why } from '../format';
import { api } from '../live';
import { cancelWorkload, cancellable, serverButtons } from './common';

// One job: who, what, its timeline, why it waited, its pods, its logs and how it ended (live).
export function job(data, live) {
  let w = data.workload;
  let deleted = false;

  function exitStatus() {
    const failed = (w.events || []).filter(e => e.type === 'failed').pop();
    if (failed && failed.details && failed.details.exitCode !== undefined) return `exit status ${failed.details.exitCode}`;
    if (w.state === 'Succeeded') return 'exit status 0 (every pod succeeded)';
    if (failed) return failed.message;
    return ['Pending', 'Running'].includes(w.state) ? 'not ended yet' : stateWord(w.state, w.reason);
  }

  function render() {
    const now = Date.now() / 1000;
    const facts = [
      ['team', w.tenant || '—'], ['namespace', w.namespace], ['owner', w.user], ['kind', w.kind],
      ['priority class', w.priorityClassName || '—'], ['asks for', requests(w)], ['id', w.id],
      ['state', `${stateWord(w.state, w.reason)}${w.gang ? ' (a gang: all its pods start together)' : ''}`],
      ['now', why(w, now) || '—'], ['submitted', when(w.created)], ['started', when(startedAt(w))],
      ['ended', when(finishedAt(w))], ['exit', exitStatus()]
    ];
    document.getElementById('cancel').hidden = !cancellable(w, data);
    // a notebook of one's own: its server stopped or (a named one) deleted from here, as from the hub home
    fill(document.getElementById('server-actions'), serverButtons(w, data, answer => {
      if (answer && answer.removed) deleted = true;
      refresh();
    }, !deleted));
    fill(document.getElementById('facts'), facts.flatMap(([k, v]) => [h('dt', {}, k), h('dd', { 'data-fact': k }, v)]));
    const events = w.events || [];
    rows(document.getElementById('timeline'), events.map(e => h('tr', { 'data-type': e.type },
      h('td', {}, when(e.time)), h('td', {}, e.type), h('td', {}, e.message))));
    const reasons = events.filter(e => e.type === 'waiting');
    fill(document.getElementById('reasons'), reasons.length
      ? reasons.map(e => h('li', {}, `${when(e.time)}: ${sentence(e.message)}`))
      : [h('li', {}, 'It never had to wait.')]);
    rows(document.getElementById('pods'), (w.pods || []).map(p => h('tr', {},
      h('td', {}, p.name), h('td', {}, p.phase), h('td', {}, p.node || '—'), h('td', {}, when(p.startedAt)),
      h('td', {}, when(p.finishedAt)), h('td', {}, p.message || ''))));
  }

  async function refresh() {
    try {
      w = await api(data.prefix, `workloads/${w.id}`);
      render();
    } catch (err) {
      /* shown as it was */
    }
  }

  async function logs() {
    const pre = document.getElementById('logs');
    try {
      const text = await api(data.prefix, `workloads/${w.id}/logs`);
      pre.textContent = text || 'No output yet.';
    } catch (err) {
      pre.textContent = `The logs cannot be shown: ${err.message}.`;
    }
  }

  render();
  logs();
  document.getElementById('cancel').addEventListener('click', () => cancelWorkload(data, w, view => {
    if (view && view.id === w.id) w = { ...w, ...view, events: view.events || w.events };
    render();
  }));
  document.getElementById('logs-refresh').addEventListener('click', logs);
  live.on('workload', changed => {
    if (changed.id === w.id) refresh();
  });
}
