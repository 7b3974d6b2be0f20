import { dump, load } from 'js-yaml';

import { fill, h, rows } from '../dom';
import { datasetState, quantity, sentence, when } from '../format';
import { api } from '../live';

// The datasets page: one table per dataset (its facts, then its state in each namespace, why it is not
// ready, how many running workloads mount it), read from api/v1/datasets (a user's teams' datasets; all for
// an admin) and read again whenever work changes. Admins add, change (YAML or JSON, a dry run first) and
// remove datasets through the same API; the service keeps each change in the audit trail. Admins also choose
// to accelerate a dataset (a cache in front of it in each namespace, Fluid on Kubernetes): a dry run of what
// would be made first, then a confirmation; where the backend cannot, the button is off and the page says why.
// Once accelerated, each namespace's row says how its cache is, for users too.

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
  // What a dataset's section asks or says in place of its buttons (a confirmation, an answer): kept here,
  // not in the DOM, as the sections are drawn again each time the datasets are read (every few seconds).
  const asking = new Map();

  function capacity(d) {
    return d.size ? quantity('requests.storage', d.size) : d.source && d.source.kind === 'path' ? 'a folder: no fixed size' : '—';
  }

  function access(d) {
    return [d.readOnly ? 'read-only' : 'read and write', ...(d.accessModes || [])].join(' · ');
  }

  function accelerated(d) {
    return Boolean(d.acceleration && d.acceleration.enabled);
  }

  // The cache's state in a namespace, in words: ready, or not (yet) and why, as the backend said it.
  function cacheCell(d, ns) {
    const c = (d.acceleration.state || {})[ns] || { state: 'Pending', message: `the cache is not made in ${ns} yet` };
    return h('td', { class: 'cache', 'data-cache-state': c.state },
      h('span', { class: `tag ${STATE_CLASS[c.state] || ''}` }, datasetState(c.state)), ' ',
      h('span', { class: 'why' }, c.state === 'Bound' ? 'Work started here reads it through the cache.' : sentence(c.message)));
  }

  function namespaceRows(d) {
    const status = d.status || {};
    let names = [...new Set([...(d.namespaces || []), ...Object.keys(status)])];
    if (!data.admin) names = names.filter(ns => mine.has(ns));
    const fast = accelerated(d);
    if (!names.length) return [h('tr', {}, h('td', { colspan: fast ? 5 : 4 }, 'No namespace may use it yet.'))];
    return names.map(ns => {
      const s = status[ns] || { state: 'Pending', message: 'The scheduler has not provisioned it yet.' };
      const used = (d.inUse || {})[ns] || 0;
      return h('tr', { 'data-namespace': ns, 'data-state': s.state },
        h('th', { scope: 'row' }, ns),
        h('td', {}, h('span', { class: `tag ${STATE_CLASS[s.state] || ''}` }, datasetState(s.state))),
        // the binder's, the quota's or the API server's own words, as they said them
        h('td', { class: 'why' }, s.state === 'Bound' ? '' : s.message || ''),
        h('td', { class: 'in-use' }, !used ? 'not in use' : used === 1 ? '1 running workload' : `${used} running workloads`),
        fast ? cacheCell(d, ns) : null);
    });
  }

  // Accelerate (or stop), and where the backend cannot, its sentence beside the button.
  function accelerateButton(d) {
    const fast = d.acceleration;
    if (!fast) return [];
    if (fast.enabled) {
      return [h('button', { type: 'button', class: 'small', 'data-action': 'stop-accelerating',
        onclick: () => { asking.set(d.name, { what: 'stop' }); render(); } }, 'Stop accelerating')];
    }
    const why = fast.available ? null : `It cannot be accelerated here: ${fast.why || 'the backend cannot accelerate datasets'}`;
    return [h('button', { type: 'button', class: 'small', 'data-action': 'accelerate', disabled: !fast.available,
      'aria-describedby': why ? `why-accelerate-${d.name}` : null, onclick: () => askAccelerate(d) }, 'Accelerate'),
    why ? h('span', { class: 'why', id: `why-accelerate-${d.name}`, 'data-why': 'accelerate' }, sentence(why)) : null];
  }

  // What an accelerate's dry run says would be made in each namespace.
  function plan(d, answer) {
    const words = { create: 'would get', keep: 'keeps' };
    return h('div', { class: 'plan', 'data-plan': 'accelerate' },
      h('p', {}, `Accelerating ${d.name} puts a cache in front of it in each namespace that may use it; work started from then on reads it through the cache once the cache is ready. Nothing has changed yet.`),
      answer.make.length ? h('ul', {}, answer.make.map(m => h('li', { 'data-namespace': m.namespace, 'data-action': m.action },
        h('strong', {}, m.namespace), `: ${words[m.action] || m.action} `,
        (m.objects || []).map(o => `${o.kind} ${o.name}`).join(' and ') || 'nothing')))
        : h('p', {}, 'No namespace may use it: nothing would be made.'));
  }

  function asked(d) {
    const ask = asking.get(d.name);
    const keep = label => h('button', { type: 'button', class: 'small', onclick: () => { asking.delete(d.name); render(); } }, label);
    if (ask.what === 'remove') {
      return [h('span', { class: 'confirm' }, `Remove ${d.name}? Its claims go once nothing uses them. `),
        h('button', { type: 'button', class: 'small', 'data-action': 'confirm-remove', onclick: () => remove(d) }, `Yes, remove ${d.name}`), ' ',
        keep('Keep it')];
    }
    if (ask.what === 'asking') return [h('span', {}, `Asking the scheduler what accelerating ${d.name} would make…`)];
    if (ask.what === 'accelerate') {
      return [plan(d, ask.answer), h('span', { class: 'confirm' }, `Accelerate ${d.name}? `),
        h('button', { type: 'button', class: 'small primary', 'data-action': 'confirm-accelerate', onclick: () => accelerate(d, true) }, `Yes, accelerate ${d.name}`), ' ',
        keep('Not now')];
    }
    if (ask.what === 'stop') {
      return [h('span', { class: 'confirm' }, `Stop accelerating ${d.name}? Its caches go once nothing uses them; work started from then on reads the dataset itself. `),
        h('button', { type: 'button', class: 'small', 'data-action': 'confirm-stop-accelerating', onclick: () => accelerate(d, false) }, `Yes, stop accelerating ${d.name}`), ' ',
        keep('Keep accelerating')];
    }
    // an answer: what happened, or the API's sentence why not; the buttons are back beside it
    return [h('p', { class: `notice ${ask.good ? 'good' : 'bad'}`, role: ask.good ? null : 'alert', 'data-answer': 'accelerate' }, ask.text), ...buttons(d)];
  }

  function buttons(d) {
    const writable = d.origin === 'api';
    return [h('button', { type: 'button', class: 'small', 'data-action': 'edit', disabled: !writable,
      title: writable ? null : `Declared in ${ORIGIN_WORDS[d.origin] || d.origin}`, onclick: () => edit(d) }, 'Edit'), ' ',
    h('button', { type: 'button', class: 'small', 'data-action': 'remove', disabled: !writable,
      title: writable ? null : `Declared in ${ORIGIN_WORDS[d.origin] || d.origin}`,
      onclick: () => { asking.set(d.name, { what: 'remove' }); render(); } }, 'Remove'), ' ',
    ...accelerateButton(d)];
  }

  function card(d) {
    const fast = accelerated(d);
    const facts = [
      ['Description', d.description || '—'],
      ['Source', `${SOURCE_WORDS[d.source && d.source.kind] || (d.source && d.source.kind) || '—'}${d.source && d.source.detail ? `: ${d.source.detail}` : ''}`],
      ['Capacity', capacity(d)],
      ['Access', access(d)],
      ['Mounted at', d.mountPath],
      ['Teams', (d.teams || []).join(', ') || '—']
    ];
    if (data.admin) facts.push(['Declared in', (ORIGIN_WORDS[d.origin] || d.origin || '—').replace('NAME', d.name)]);
    if (fast) facts.push(['Accelerated', 'yes: a cache in front of it in each namespace (its state below)']);
    const actions = data.admin ? h('div', { class: 'actions' }, asking.has(d.name) ? asked(d) : buttons(d)) : null;
    return h('section', { class: 'dataset', 'data-dataset': d.name },
      h('h2', {}, d.name, ' ', h('span', { class: `tag ${d.readOnly ? '' : 'borrowing'}` }, d.readOnly ? 'read-only' : 'writable')),
      h('dl', { class: 'facts' }, facts.flatMap(([k, v]) => [h('dt', {}, k), h('dd', { 'data-fact': k.toLowerCase() }, v)])),
      h('div', { class: 'scroll' }, h('table', { class: 'namespaces' },
        h('thead', {}, h('tr', {}, h('th', {}, 'namespace'), h('th', {}, 'state'), h('th', {}, 'why'), h('th', {}, 'in use'),
          fast ? h('th', {}, 'cache') : null)),
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

  async function askAccelerate(d) {
    asking.set(d.name, { what: 'asking' });
    render();
    let answer;
    try {
      answer = await api(data.prefix, `datasets/${encodeURIComponent(d.name)}/accelerate?dryRun=true`, { method: 'POST' });
    } catch (err) {
      asking.set(d.name, { text: sentence(`Not accelerated: ${err.message}`) });
      render();
      return;
    }
    asking.set(d.name, answer.available ? { what: 'accelerate', answer }
      : { text: sentence(`${d.name} cannot be accelerated here: ${answer.why}`) });
    render();
  }

  async function accelerate(d, on) {
    try {
      await api(data.prefix, `datasets/${encodeURIComponent(d.name)}/accelerate`, { method: on ? 'POST' : 'DELETE' });
      asking.set(d.name, { good: true, text: on ? `${d.name} is accelerated: each namespace's cache is below.`
        : `${d.name} is no longer accelerated: work started from now on reads the dataset itself.` });
      await Promise.all([refresh(), audit()]);
    } catch (err) {
      asking.set(d.name, { text: sentence(`${on ? 'Not accelerated' : 'Still accelerated'}: ${err.message}`) });
      render();
    }
  }

  async function remove(d) {
    asking.delete(d.name);
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
