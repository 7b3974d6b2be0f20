import { dump, load } from 'js-yaml';

import { fill, h, rows } from '../dom';
import { datasetState, quantity, when } from '../format';
import { api } from '../live';

// The datasets page: one table per dataset (its facts, then its state in each namespace, why it is not
// ready, how many running workloads mount it), read from api/v1/datasets (a user's teams' datasets; all for
// an admin) and read again whenever work changes. Admins add, change (YAML or JSON, a dry run first) and
// remove datasets through the same API; the service keeps each change in the audit trail.

const EXAMPLE = `apiVersion: tenancy.jupyter.org/v1alpha1
kind: Dataset
metadata: {name: my-dataset}
spec:
  description: What the data is, in a sentence
  teams: [team-a]            # hub groups, or "*"; and/or namespaces: [...]
  source:
    path: /srv/data/my-dataset  # or claim: NAME, or persistentVolume: {...}
  readOnly: true
  mountPath: /datasets/my-dataset
`;

const STATE_CLASS = { Bound: 'ok', Pending: 'borrowing', Refused: 'at-max' };
const SOURCE_WORDS = { persistentVolume: 'a volume (one claim per namespace)', claim: "each namespace's existing claim", path: 'a folder' };
const ORIGIN_WORDS = {
  config: "the service's configuration: change it there",
  cluster: 'a Dataset object on the cluster: kubectl edit dataset NAME',
  api: 'this page or tenancy datasets apply'
};

export function datasets(data, live) {
  const box = document.getElementById('datasets');
  const mine = new Set(data.namespaces || []);
  let known = [];
  let previewed = null; // the text last dry-run without a refusal of the object itself

  function capacity(d) {
    return d.size ? quantity('requests.storage', d.size) : d.source && d.source.kind === 'path' ? 'a folder: no fixed size' : '—';
  }

  function access(d) {
    return [d.readOnly ? 'read-only' : 'read and write', ...(d.accessModes || [])].join(' · ');
  }

  function namespaceRows(d) {
    const status = d.status || {};
    let names = [...new Set([...(d.namespaces || []), ...Object.keys(status)])];
    if (!data.admin) names = names.filter(ns => mine.has(ns));
    if (!names.length) return [h('tr', {}, h('td', { colspan: 4 }, 'No namespace may use it yet.'))];
    return names.map(ns => {
      const s = status[ns] || { state: 'Pending', message: 'The scheduler has not provisioned it yet.' };
      const used = (d.inUse || {})[ns] || 0;
      return h('tr', { 'data-namespace': ns, 'data-state': s.state },
        h('th', { scope: 'row' }, ns),
        h('td', {}, h('span', { class: `tag ${STATE_CLASS[s.state] || ''}` }, datasetState(s.state))),
        // the binder's, the quota's or the API server's own words, as they said them
        h('td', { class: 'why' }, s.state === 'Bound' ? '' : s.message || ''),
        h('td', { class: 'in-use' }, !used ? 'not in use' : used === 1 ? '1 running workload' : `${used} running workloads`));
    });
  }

  function card(d) {
    const writable = d.origin === 'api';
    const facts = [
      ['Description', d.description || '—'],
      ['Source', `${SOURCE_WORDS[d.source && d.source.kind] || (d.source && d.source.kind) || '—'}${d.source && d.source.detail ? `: ${d.source.detail}` : ''}`],
      ['Capacity', capacity(d)],
      ['Access', access(d)],
      ['Mounted at', d.mountPath],
      ['Teams', (d.teams || []).join(', ') || '—']
    ];
    if (data.admin) facts.push(['Declared in', (ORIGIN_WORDS[d.origin] || d.origin || '—').replace('NAME', d.name)]);
    const actions = data.admin ? h('p', { class: 'actions' },
      h('button', { type: 'button', class: 'small', 'data-action': 'edit', disabled: !writable,
        title: writable ? null : `Declared in ${ORIGIN_WORDS[d.origin] || d.origin}`, onclick: () => edit(d) }, 'Edit'), ' ',
      h('button', { type: 'button', class: 'small', 'data-action': 'remove', disabled: !writable,
        title: writable ? null : `Declared in ${ORIGIN_WORDS[d.origin] || d.origin}`, onclick: e => askRemove(d, e.target) }, 'Remove'))
      : null;
    return h('section', { class: 'dataset', 'data-dataset': d.name },
      h('h2', {}, d.name, ' ', h('span', { class: `tag ${d.readOnly ? '' : 'borrowing'}` }, d.readOnly ? 'read-only' : 'writable')),
      h('dl', { class: 'facts' }, facts.flatMap(([k, v]) => [h('dt', {}, k), h('dd', { 'data-fact': k.toLowerCase() }, v)])),
      h('div', { class: 'scroll' }, h('table', { class: 'namespaces' },
        h('thead', {}, h('tr', {}, h('th', {}, 'namespace'), h('th', {}, 'state'), h('th', {}, 'why'), h('th', {}, 'in use'))),
        h('tbody', {}, namespaceRows(d)))),
      actions);
  }

  function render() {
    if (!known.length) {
      fill(box, h('p', { id: 'no-datasets' }, data.admin
        ? 'No dataset is declared yet: add one below, or in the service\'s configuration.'
        : 'No dataset is declared for your teams yet: an admin adds them.'));
      return;
    }
    fill(box, known.map(card));
  }

  async function refresh() {
    try {
      known = (await api(data.prefix, 'datasets')).datasets || [];
      render();
    } catch (err) {
      fill(box, h('p', { class: 'notice bad', role: 'alert' }, `The datasets could not be read: ${err.message}`));
    }
  }

  // Work starting and ending changes what is in use; a sample may carry a new state: read again, at most
  // once a second (changes come in bursts).
  let pending = null;
  function soon() {
    if (pending) return;
    pending = setTimeout(() => { pending = null; refresh(); }, 1000);
  }
  live.on('workload', soon);
  live.on('sample', soon);
  refresh();
  if (!data.admin) return;

  const text = document.getElementById('manifest');
  const result = document.getElementById('result');
  const applyButton = document.getElementById('apply');

  function changed() {
    previewed = null;
    applyButton.disabled = true;
  }

  function parsed() {
    const obj = load(text.value);
    if (!obj || typeof obj !== 'object' || Array.isArray(obj)) throw new Error('write one Dataset object (a mapping)');
    const name = obj.metadata && obj.metadata.name;
    if (!name || typeof name !== 'string') throw new Error('metadata.name is missing: every dataset has a name');
    return { obj, name };
  }

  function edit(d) {
    text.value = dump(d.manifest, { lineWidth: 100, noRefs: true });
    changed();
    fill(result);
    text.scrollIntoView({ block: 'center' });
    text.focus();
  }

  function provision(answer) {
    const items = answer.provision || [];
    const refused = items.filter(p => p.refused);
    const words = { create: 'would be provisioned', keep: 'keeps it', remove: 'would lose it (once nothing uses it)' };
    return h('section', { id: 'provision' },
      h('h3', {}, `What ${answer.dataset ? answer.dataset.name : 'this dataset'} would get`),
      items.length ? h('ul', {}, items.map(p => h('li', { 'data-namespace': p.namespace, 'data-action': p.action, class: p.refused ? 'refused' : '' },
        h('strong', {}, p.namespace), p.refused ? ': would be refused' : `: ${words[p.action] || p.action}`,
        p.refused ? h('span', { class: 'why' }, ` — ${p.refused}`) : null)))
        : h('p', {}, 'No namespace may use it: nothing would be provisioned.'),
      refused.length ? h('p', { class: 'notice warn' }, `${refused.length} namespace${refused.length > 1 ? 's' : ''} would refuse it: raise the namespace's quota, or apply it anyway and it is provisioned once the quota allows.`) : null);
  }

  async function dryRun() {
    let body;
    try {
      body = parsed();
    } catch (err) {
      changed();
      fill(result, h('p', { class: 'notice bad', id: 'invalid', role: 'alert' }, `This is not a dataset yet: ${err.message}`));
      return;
    }
    fill(result, h('p', {}, 'Asking the scheduler what this would provision…'));
    try {
      const answer = await api(data.prefix, `datasets/${encodeURIComponent(body.name)}?dryRun=true`, { method: 'PUT', body: JSON.stringify(body.obj) });
      previewed = text.value;
      applyButton.disabled = false;
      fill(result, h('p', { class: 'notice' }, 'Dry run: nothing has changed yet.'), provision(answer));
    } catch (err) {
      changed();
      fill(result, h('p', { class: 'notice bad', id: 'invalid', role: 'alert' },
        err.status === 400 ? `This dataset is not valid: ${err.message}` : `Not possible: ${err.message}`));
    }
  }

  async function apply() {
    if (text.value !== previewed) return dryRun();
    const { obj, name } = parsed();
    try {
      await api(data.prefix, `datasets/${encodeURIComponent(name)}`, { method: 'PUT', body: JSON.stringify(obj) });
      changed();
      fill(result, h('p', { class: 'notice good', id: 'applied' }, `Dataset ${name} is applied: each namespace's state is below.`));
      await Promise.all([refresh(), audit()]);
    } catch (err) {
      fill(result, h('p', { class: 'notice bad', role: 'alert' }, `Not applied: ${err.message}`));
    }
  }

  function askRemove(d, button) {
    const where = button.parentElement;
    fill(where, h('span', { class: 'confirm' }, `Remove ${d.name}? Its claims go once nothing uses them. `),
      h('button', { type: 'button', class: 'small', 'data-action': 'confirm-remove', onclick: () => remove(d) }, `Yes, remove ${d.name}`), ' ',
      h('button', { type: 'button', class: 'small', onclick: render }, 'Keep it'));
  }

  async function remove(d) {
    try {
      await api(data.prefix, `datasets/${encodeURIComponent(d.name)}`, { method: 'DELETE' });
      fill(result, h('p', { class: 'notice good', id: 'removed' }, `Dataset ${d.name} is removed.`));
      await Promise.all([refresh(), audit()]);
    } catch (err) {
      fill(result, h('p', { class: 'notice bad', role: 'alert' }, `Not removed: ${err.message}`));
      render();
    }
  }

  function showAudit(entries) {
    rows(document.getElementById('audit'), entries.length ? entries.map(e => h('tr', {},
      h('td', {}, when(e.time)), h('td', {}, e.by || ''),
      h('td', {}, e.changes && e.changes.length ? h('ul', {}, e.changes.map(c => h('li', {}, c))) : e.message)))
      : [h('tr', {}, h('td', { colspan: 3 }, 'No dataset has been changed here yet.'))]);
  }

  async function audit() {
    try {
      // the hub's login cookie counts for a script's own request only with the session's XSRF token
      const r = await fetch(`${data.prefix}datasets?audit=1`, {
        credentials: 'same-origin', headers: { Accept: 'application/json', 'X-XSRFToken': data.xsrf || '' } });
      if (r.ok) showAudit((await r.json()).audit || []);
    } catch (err) {
      /* the trail stays as it was; the next change tries again */
    }
  }

  text.value = EXAMPLE;
  text.addEventListener('input', changed);
  showAudit(data.audit || []);
  document.getElementById('dry-run').addEventListener('click', dryRun);
  applyButton.addEventListener('click', apply);
  document.getElementById('new').addEventListener('click', () => { text.value = EXAMPLE; changed(); fill(result); });
}
