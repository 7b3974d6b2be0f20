import { fill, h, rows } from '../dom';
import { resourceName, sentence, when } from '../format';
import { api } from '../live';
import { comparison } from './compare';

// The quota-tree editor: nodes as rows (min and max per resource, namespaces on leaves), a preview from the
// engine's dry run, then apply. Nothing is sent but the whole tree, as PUT api/v1/tree (?dryRun=true first).
export function tree(data) {
  const original = data.tree;
  const tenants = data.tenants || [];
  let nodes = [];
  let resources = [];
  let previewed = null; // the manifest last previewed without errors
  const week = comparison(data);

  function load(manifest) {
    nodes = [];
    const walk = (n, parent) => {
      nodes.push({ name: n.name, parent, min: { ...(n.min || {}) }, max: { ...(n.max || {}) },
        namespaces: (n.namespaces || []).join(', '), original: n.name });
      for (const c of n.children || []) walk(c, n.name);
    };
    if (manifest && manifest.spec && manifest.spec.root) walk(manifest.spec.root, null);
    const set = new Set();
    for (const n of nodes) for (const r of [...Object.keys(n.min), ...Object.keys(n.max)]) set.add(r);
    resources = [...set].sort((a, b) => (a !== 'cpu') - (b !== 'cpu') || a.localeCompare(b));
    if (!resources.length) resources = ['cpu'];
  }

  function children(name) {
    return nodes.filter(n => n.parent === name);
  }

  function manifest() {
    const build = n => {
      const out = { name: n.name.trim() };
      const clean = obj => Object.fromEntries(Object.entries(obj).filter(([, v]) => String(v).trim() !== '').map(([k, v]) => [k, String(v).trim()]));
      const max = clean(n.max);
      const min = clean(n.min);
      if (Object.keys(max).length) out.max = max;
      if (Object.keys(min).length) out.min = min;
      const kids = children(n.name);
      if (kids.length) out.children = kids.map(build);
      else {
        const ns = n.namespaces.split(',').map(s => s.trim()).filter(Boolean);
        if (ns.length) out.namespaces = ns;
      }
      return out;
    };
    const root = nodes.find(n => n.parent === null);
    return {
      apiVersion: (original && original.apiVersion) || 'scheduling.sigs.k8s.io/v1beta1',
      kind: 'ElasticQuotaTree',
      metadata: (original && original.metadata) || { name: 'elasticquotatree', namespace: 'kube-system' },
      spec: { root: root ? build(root) : { name: 'root' } }
    };
  }

  function changed() {
    previewed = null;
    week.clear(); // a comparison shown is of the tree as it was
    document.getElementById('apply').disabled = true;
  }

  function ordered() {
    const out = [];
    const walk = (n, d) => {
      out.push([n, d]);
      for (const c of children(n.name)) walk(c, d + 1);
    };
    const root = nodes.find(n => n.parent === null);
    if (root) walk(root, 0);
    return out;
  }

  function rename(node, value) {
    for (const c of children(node.name)) c.parent = value;
    node.name = value;
  }

  function render() {
    const table = document.getElementById('editor');
    fill(table.tHead, h('tr', {}, h('th', {}, 'quota node'), h('th', {}, 'team'), h('th', {}, 'namespaces (leaves)'),
      resources.flatMap(r => [h('th', {}, `min ${resourceName(r)}`), h('th', {}, `max ${resourceName(r)}`)]), h('th', {}, '')));
    rows(table, ordered().map(([n, d]) => {
      const leaf = !children(n.name).length;
      const teams = tenants.filter(t => t.leaf === n.original || t.leaf === n.name).map(t => t.group);
      const input = (cls, value, label, set) => h('input', { class: cls, value, 'aria-label': label,
        oninput: e => { set(e.target.value); e.target.classList.add('changed'); changed(); } });
      return h('tr', { 'data-node': n.name },
        h('td', { class: `depth-${Math.min(d, 4)}` }, n.parent === null ? h('strong', {}, n.name)
          : input('name', n.name, `name of ${n.name}`, v => rename(n, v))),
        h('td', {}, teams.join(', ') || '—'),
        h('td', {}, leaf ? input('ns', n.namespaces, `namespaces of ${n.name}`, v => { n.namespaces = v; }) : ''),
        resources.flatMap(r => ['min', 'max'].map(k => h('td', {},
          input('amount', n[k][r] ?? '', `${k} ${r} of ${n.name}`, v => { n[k][r] = v; })))),
        h('td', {},
          h('button', { type: 'button', class: 'small', 'data-action': 'add', onclick: () => addChild(n) }, 'add child'), ' ',
          n.parent === null ? '' : h('button', { type: 'button', class: 'small', 'data-action': 'remove', onclick: () => remove(n) }, 'remove')));
    }));
  }

  function addChild(parent) {
    let i = 1;
    while (nodes.some(n => n.name === `${parent.name}.${i}`)) i += 1;
    const wasLeaf = !children(parent.name).length;
    nodes.push({ name: `${parent.name}.${i}`, parent: parent.name, min: {}, max: {}, namespaces: wasLeaf ? parent.namespaces : '', original: null });
    if (wasLeaf) parent.namespaces = '';
    changed();
    render();
  }

  function remove(node) {
    const gone = new Set([node.name]);
    let grew = true;
    while (grew) {
      grew = false;
      for (const n of nodes) if (!gone.has(n.name) && gone.has(n.parent)) { gone.add(n.name); grew = true; }
    }
    nodes = nodes.filter(n => !gone.has(n.name));
    changed();
    render();
  }

  function who(w) {
    return `${w.team || w.namespace}: ${w.user ? `${w.user}'s ${w.kind} ` : ''}${w.name}${w.workload ? ` (${w.workload})` : ''}`;
  }

  function show(preview, applied) {
    const parts = [];
    if (applied) parts.push(h('p', { class: 'notice good', id: 'applied' }, 'The new quota tree is in force.'));
    const list = (title, id, items, text) => h('section', { id }, h('h3', {}, `${title} (${items.length})`),
      items.length ? h('ul', {}, items.map(i => h('li', {}, text(i)))) : h('p', {}, 'None.'));
    parts.push(list('Would be evicted now', 'would-evict', preview.evictions || [], e => `${who(e)}: ${sentence(e.message)}`));
    parts.push(list('Would start now', 'would-start', preview.admitted || [], who));
    parts.push(list('Left above a new max', 'over-max', preview.overMax || [], o => `${o.message}. Running there: ${o.workloads.map(who).join('; ') || 'nothing'}.`));
    parts.push(list('Could never start under this tree', 'never-start', preview.inadmissible || [], e => `${who(e)}: ${sentence(e.message)}`));
    parts.push(list('Could start again', 'start-again', preview.admissibleAgain || [], who));
    const other = (preview.warnings || []).filter(w => !(preview.overMax || []).some(o => o.message === w));
    if (other.length) parts.push(h('section', {}, h('h3', {}, 'Warnings'), h('ul', {}, other.map(w => h('li', {}, w)))));
    fill(document.getElementById('result'), parts);
  }

  async function preview() {
    const body = manifest();
    const result = document.getElementById('result');
    fill(result, h('p', {}, 'Asking the scheduler what this tree would do…'));
    try {
      const answer = await api(data.prefix, 'tree?dryRun=true', { method: 'PUT', body: JSON.stringify(body) });
      previewed = JSON.stringify(body);
      show(answer, false);
      document.getElementById('apply').disabled = false;
    } catch (err) {
      previewed = null;
      document.getElementById('apply').disabled = true;
      fill(result, h('p', { class: 'notice bad', id: 'invalid', role: 'alert' },
        err.status === 400 ? `This tree is not valid: ${err.message}` : `The preview failed: ${err.message}`));
    }
  }

  async function apply() {
    const body = manifest();
    if (JSON.stringify(body) !== previewed) {
      changed();
      return preview();
    }
    try {
      const answer = await api(data.prefix, 'tree', { method: 'PUT', body: JSON.stringify(body) });
      show(answer, true);
      document.getElementById('apply').disabled = true;
      if (answer.audit) audit(answer.audit);
      load(body);
      for (const n of nodes) n.original = n.name;
      render();
    } catch (err) {
      fill(document.getElementById('result'), h('p', { class: 'notice bad', role: 'alert' }, `Not applied: ${err.message}`));
    }
  }

  function audit(entries) {
    rows(document.getElementById('audit'), entries.length ? entries.map(e => h('tr', {},
      h('td', {}, when(e.time)), h('td', {}, e.by || ''),
      h('td', {}, e.changes && e.changes.length ? h('ul', {}, e.changes.map(c => h('li', {}, c))) : e.message)))
      : [h('tr', {}, h('td', { colspan: 3 }, 'The tree has not been changed here yet.'))]);
  }

  load(original);
  render();
  audit(data.audit || []);
  document.getElementById('preview').addEventListener('click', preview);
  document.getElementById('apply').addEventListener('click', apply);
  document.getElementById('compare').addEventListener('click', () => week.compare(manifest()));
  document.getElementById('reset').addEventListener('click', () => { load(original); changed(); render(); fill(document.getElementById('result')); });
  document.getElementById('add-root-child').addEventListener('click', () => addChild(nodes.find(n => n.parent === null)));
}
