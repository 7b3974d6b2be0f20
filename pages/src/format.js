// The pages' own helpers; the words and numbers people read come from the one vocabulary
// the Lab extension shares (labextension/src/vocabulary.ts, compiled into this bundle by esbuild).
import { duration, isBytes, quantity, resourceName, sentence, startedAt, when } from '../../labextension/src/vocabulary';

export { amount, datasetState, duration, isBytes, quantity, resourceName, sentence, startedAt, stateWord, timeOfDay, when } from '../../labextension/src/vocabulary';

// For chart axes: memory in GiB, everything else as is.
export function plotValue(res, value) {
  if (value === null || value === undefined) return null;
  return isBytes(res) ? value / 1024 ** 3 : value;
}

export function unit(res) {
  if (isBytes(res)) return 'GiB';
  if (res === 'cpu') return 'cores';
  if (res === 'nvidia.com/gpu') return 'GPUs';
  return '';
}

export function requests(w) {
  const req = (w.resources && w.resources.requests) || {};
  const parts = Object.entries(req).map(([r, v]) => `${resourceName(r)} ${quantity(r, v)}`);
  const n = w.replicas || 1;
  return (n > 1 ? `${n} × ` : '') + (parts.join(', ') || '—');
}

export function finishedAt(w) {
  const f = (w.pods || []).map(p => p.finishedAt).filter(t => typeof t === 'number');
  return w.finished || (f.length ? Math.max(...f) : null);
}

// Why it waits, or when it ran, in one line.
export function why(w, now) {
  if (w.state === 'Pending') {
    const pos = w.position ? ` Position ${w.position} in the queue, ${w.leafPosition} in its team.` : '';
    return sentence(w.message || 'Queued: the scheduler looks at it in a moment') + pos;
  }
  const start = startedAt(w);
  if (w.state === 'Running') return start ? `Running for ${duration(now - start)}.` : 'Running.';
  const end = finishedAt(w);
  if (start && end) return `Ran ${duration(end - start)}, ended ${when(end)}. ${sentence(w.message || '')}`.trim();
  return sentence(w.message || '');
}

// One colour per team (or node) for the whole page: given in the order names are first drawn.
const PALETTE = ['#4a90d9', '#e8833a', '#3fa34d', '#b55fd6', '#d9534f', '#17a2b8', '#8d6e63', '#c2a200', '#5c6bc0', '#26a69a'];
const GIVEN = new Map();
export function colour(name) {
  if (name === 'other teams') return '#9aa4ae';
  if (!GIVEN.has(name)) GIVEN.set(name, PALETTE[GIVEN.size % PALETTE.length]);
  return GIVEN.get(name);
}
