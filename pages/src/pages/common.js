import { h, fill } from '../dom';
import { plotValue, sentence } from '../format';
import { api } from '../live';

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

// Ask before a destructive action (JupyterLab's convention): an in-page modal dialog with the
// question, a "keep" button (focused, the safe default; Escape too) and the action's own words.
// Resolves true when the person chose the action.
export function confirmAction(question, detail, actionWord) {
  return new Promise(resolve => {
    const old = document.getElementById('confirm');
    if (old) old.remove();
    const keep = h('button', { type: 'button', class: 'keep' }, 'Keep it');
    const act = h('button', { type: 'button', class: 'confirm danger' }, actionWord);
    const dialog = h('dialog', { id: 'confirm', 'aria-labelledby': 'confirm-question' },
      h('p', { id: 'confirm-question', class: 'question' }, question),
      detail ? h('p', { class: 'detail' }, detail) : null,
      h('p', { class: 'buttons' }, keep, ' ', act));
    const done = answer => {
      dialog.close();
      dialog.remove();
      resolve(answer);
    };
    keep.addEventListener('click', () => done(false));
    act.addEventListener('click', () => done(true));
    dialog.addEventListener('cancel', e => {
      e.preventDefault();
      done(false);
    });
    document.body.append(dialog);
    dialog.showModal();
    keep.focus();
  });
}

// One line under the heading saying what an action did or why it could not (role=status: read out).
export function say(text, kind = 'good', ...more) {
  const box = document.getElementById('action-message');
  if (!box) return;
  fill(box, text, ...more);
  box.className = `notice ${kind}`;
  box.hidden = !text;
}

// A page open since before a new login cannot act any more: the way out is a reload (the API says so).
function reloadButton(err) {
  if (err.status !== 403 || !/reload the page/.test(err.message)) return null;
  return [' ', h('button', { type: 'button', class: 'small reload', onclick: () => window.location.reload() }, 'Reload the page')];
}

// The person's name for a workload: "bob's training job bob-train".
export function workloadName(w) {
  const kind = w.kind === 'notebook' ? 'notebook' : 'training job';
  return `${w.user}'s ${kind} ${w.name}`;
}

// May the person looking cancel this workload here? Their own, or any as an admin; only while it waits
// or runs. Notebooks are stopped through the hub (their server), not cancelled here.
export function cancellable(w, data) {
  return w.kind !== 'notebook' && ['Pending', 'Running'].includes(w.state) && (data.admin || w.user === data.user);
}

// Cancel after asking; says what happened. The API's own sentence when it refuses.
export async function cancelWorkload(data, w, onDone) {
  const name = workloadName(w);
  const detail = w.state === 'Running'
    ? 'It is running: it stops now and its room goes to the work waiting for it. Its logs stay readable.'
    : 'It has not started: it leaves the queue.';
  if (!(await confirmAction(`Cancel ${name}?`, detail, 'Cancel the job'))) return;
  try {
    const view = await api(data.prefix, `workloads/${encodeURIComponent(w.id)}`, { method: 'DELETE' });
    say(`${name} was cancelled.`);
    if (onDone) onDone(view);
  } catch (err) {
    say(`${name} could not be cancelled. ${sentence(err.message)}`, 'warn', reloadButton(err));
  }
}

// The person's own notebook server: stopped (while it waits or runs) or, a named one, deleted from here,
// as from the hub home. Admins too act on their own servers only: the hub's admin panel has the others.
export function serverLabel(w) {
  return w.serverName ? `your server ${w.serverName}` : 'your default server';
}

export function stoppable(w, data) {
  return w.kind === 'notebook' && w.user === data.user && ['Pending', 'Running'].includes(w.state);
}

export function deletable(w, data) {
  return w.kind === 'notebook' && w.user === data.user && Boolean(w.serverName);
}

// Stop or delete after asking (JupyterLab's convention): the hub's REST API with the person's own login,
// through the service (api/v1/servers/{server}); the hub's refusal said in one line.
export async function serverAction(data, w, remove, onDone) {
  const label = serverLabel(w);
  const Label = label[0].toUpperCase() + label.slice(1);
  const running = ['Pending', 'Running'].includes(w.state);
  const question = remove ? `Delete ${label}?` : `Stop ${label}?`;
  const detail = remove
    ? (running ? 'It is stopped first: its programs end and unsaved changes in it are lost. ' : '')
      + 'The server is removed from your servers on the hub home; your files are kept.'
    : (w.state === 'Pending'
      ? 'It leaves the queue and does not start. Your files are kept; you can start it again later.'
      : 'Its programs end and unsaved changes in it are lost. Your files are kept; you can start it again later.');
  if (!(await confirmAction(question, detail, remove ? 'Delete the server' : 'Stop the server'))) return;
  const path = `servers/${encodeURIComponent(w.serverName || '')}${remove ? '?remove=true' : ''}`;
  try {
    const answer = await api(data.prefix, path, { method: 'DELETE' });
    const what = remove ? 'deleted' : 'stopped';
    say(answer && answer.pending ? `${Label} is being ${what}.` : `${Label} was ${what}.`);
    if (onDone) onDone(answer);
  } catch (err) {
    say(`${Label} could not be ${remove ? 'deleted' : 'stopped'}. ${sentence(err.message)}`, 'warn',
      reloadButton(err));
  }
}

// The Stop… and Delete… buttons of a notebook row or page (none when neither applies).
export function serverButtons(w, data, onDone, mayDelete = true) {
  const out = [];
  if (stoppable(w, data)) {
    out.push(h('button', { type: 'button', class: 'stop-server small', onclick: () => serverAction(data, w, false, onDone) }, 'Stop…'));
  }
  if (mayDelete && deletable(w, data)) {
    if (out.length) out.push(' ');
    out.push(h('button', { type: 'button', class: 'delete-server small danger', onclick: () => serverAction(data, w, true, onDone) }, 'Delete…'));
  }
  return out;
}
