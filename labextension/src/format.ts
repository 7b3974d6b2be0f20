/** Words and numbers for people: every function here is pure (tested by jest). */

import { FINAL, INotice, IResourceBar, ISnapshot, IWorkload } from './types';

const NAMES: Record<string, string> = { cpu: 'CPU', memory: 'memory', 'nvidia.com/gpu': 'GPU' };

export function resourceName(resource: string): string {
  return NAMES[resource] ?? resource;
}

/** An amount as people read it: cores and GPUs as numbers, bytes in Gi/Mi. */
export function amount(resource: string, value: number): string {
  if (resource === 'memory' || resource.endsWith('.memory')) {
    const gi = value / 1024 ** 3;
    if (gi >= 1) {
      return `${trim(gi)}Gi`;
    }
    return `${trim(value / 1024 ** 2)}Mi`;
  }
  return trim(value);
}

function trim(value: number): string {
  return String(Math.round(value * 100) / 100);
}

/** Resources worth a place in the status bar: those in use, else the first the quota names. */
export function resourcesThatMatter(bars: IResourceBar[], most = 2): IResourceBar[] {
  const used = bars.filter(b => b.used > 0);
  return (used.length ? used : bars.slice(0, 1)).slice(0, most);
}

/** `CPU 12/10 (+2 borrowed) of 20`: used against the guarantee, what is borrowed, the ceiling. */
export function barText(bar: IResourceBar): string {
  const r = bar.resource;
  let text = `${resourceName(r)} ${amount(r, bar.used)}/${amount(r, bar.min)}`;
  if (bar.borrowed > 0) {
    text += ` (+${amount(r, bar.borrowed)} borrowed)`;
  }
  if (bar.max !== null) {
    text += ` of ${amount(r, bar.max)}`;
  }
  return text;
}

export function queuedCount(workloads: IWorkload[] | undefined): number {
  return (workloads ?? []).filter(w => w.state === 'Pending').length;
}

export type Level = 'ok' | 'borrowing' | 'full' | 'down' | 'evicting';

/** The status bar's text and colour for a snapshot (`now` in epoch seconds, for countdowns). */
export function statusLine(s: ISnapshot | null, now: number): { text: string; level: Level; title: string } {
  if (!s) {
    return { text: 'Team quota: connecting…', level: 'ok', title: 'Connecting to the tenancy scheduler.' };
  }
  if (!s.ok) {
    return { text: 'Team quota unavailable', level: 'down', title: s.message ?? '' };
  }
  const evicting = evictions(s, now)[0];
  if (evicting) {
    return {
      text: `Server stops in ${clock(evicting.remaining)}`,
      level: 'evicting',
      title: evicting.workload.evictionMessage ?? ''
    };
  }
  const leaf = s.path?.[0];
  const team = s.tenant?.group ?? 'no team';
  const bars = leaf ? resourcesThatMatter(leaf.resources) : [];
  const parts = [team, ...bars.map(barText)];
  const queued = queuedCount(s.workloads);
  let text = parts.join('  ');
  if (queued) {
    text += ` · ${queued} queued`;
  }
  const level: Level = leaf?.resources.some(b => b.atMax)
    ? 'full'
    : leaf?.resources.some(b => b.borrowed > 0)
      ? 'borrowing'
      : 'ok';
  const title =
    level === 'full'
      ? `${team} is at its ceiling: new work waits until something ends. Click for details.`
      : level === 'borrowing'
        ? `${team} uses more than its guarantee: the extra is borrowed and may be taken back. Click for details.`
        : `${team} is within its guarantee. Click for details.`;
  return { text, level, title };
}

/** `1:05`, `0:09`, `12:00` */
export function clock(seconds: number): string {
  const s = Math.max(0, Math.ceil(seconds));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}

/** `45 s`, `3 min`, `2 h 5 min` */
export function duration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) {
    return `${s} s`;
  }
  if (s < 3600) {
    return `${Math.floor(s / 60)} min`;
  }
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

/** Local time of day (`14:03:27`) of epoch seconds. */
export function timeOfDay(epoch: number): string {
  const d = new Date(epoch * 1000);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map(n => String(n).padStart(2, '0')).join(':');
}

/** When it started running (its first pod's start), if it did. */
export function startedAt(w: IWorkload): number | null {
  const starts = (w.pods ?? []).map(p => p.startedAt).filter((t): t is number => typeof t === 'number');
  return starts.length ? Math.min(...starts) : null;
}

/** Running for, or ran for (finished), or waited for so far (pending). */
export function elapsed(w: IWorkload, now: number): string {
  const start = startedAt(w);
  if (start === null) {
    return w.state === 'Pending' ? `waiting ${duration(now - w.created)}` : '';
  }
  const end = FINAL.includes(w.state) ? (w.finished ?? now) : now;
  return `${FINAL.includes(w.state) ? 'ran' : 'running'} ${duration(end - start)}`;
}

const STATE_WORDS: Record<string, string> = {
  Pending: 'queued',
  Running: 'running',
  Succeeded: 'done',
  Failed: 'failed',
  Cancelled: 'cancelled',
  Stopped: 'stopped',
  Preempted: 'stopped to make room',
  Rejected: 'refused',
  Quarantined: 'set aside'
};

export function stateWord(state: string): string {
  return STATE_WORDS[state] ?? state.toLowerCase();
}

/** The scheduler's reason in plain words, as a sentence. */
export function plainReason(w: IWorkload): string {
  const d = w.details ?? {};
  const msg = w.message ?? '';
  switch (w.reason) {
    case 'quota-max':
      if (d.node && d.resource && d.limit && !msg.includes('never start')) {
        const r = d.resource as string;
        return (
          `Waiting for room in quota ${d.node}: it is full for ${resourceName(r)} ` +
          `(${d.used} of ${d.limit} in use; this needs ${d.need}).`
        );
      }
      return sentence(msg);
    case 'quota-min':
      return sentence(`Waiting: ${msg}`);
    case 'cluster-capacity':
      return sentence(`Waiting for the cluster to have room: ${msg}`);
    case 'waiting-for-eviction':
      return `Starting soon: room is being made for it (${(d.victims ?? []).length || 'some'} pod(s) are stopping).`;
    case 'resource-quota':
    case 'limit-range':
      return sentence(`Refused by your namespace's limits: ${msg}`);
    case 'preempted':
    case 'reclaimed':
      return sentence(`Stopped to make room. ${msg}`);
    default:
      if (w.state === 'Pending' && !msg) {
        return 'Queued: the scheduler looks at it in a moment.';
      }
      return sentence(msg);
  }
}

function sentence(text: string): string {
  const t = text.trim();
  if (!t) {
    return '';
  }
  const first = t[0].toUpperCase() + t.slice(1);
  return /[.!?]$/.test(first) ? first : `${first}.`;
}

/** `position 2 in the queue, 1 in your team` */
export function positionText(w: IWorkload): string {
  if (w.state !== 'Pending' || !w.position) {
    return '';
  }
  return `position ${w.position} in the queue, ${w.leafPosition ?? '?'} in your team`;
}

/** My notebooks being evicted, soonest first, with the seconds left. */
export function evictions(s: ISnapshot | null, now: number): { workload: IWorkload; remaining: number }[] {
  return (s?.workloads ?? [])
    .filter(w => typeof w.evictionDeadline === 'number' && !FINAL.includes(w.state))
    .map(w => ({ workload: w, remaining: (w.evictionDeadline as number) - now }))
    .filter(e => e.remaining > -30)
    .sort((a, b) => a.remaining - b.remaining);
}

/** `your server "gpu"` or `your server` */
export function serverLabel(serverName: string | null | undefined): string {
  return serverName ? `your server "${serverName}"` : 'your server';
}

/** `Your server was stopped at 14:03:27 by team-c/carol-train-0. Reclaimed by ...` */
export function noticeText(n: INotice): string {
  const by = n.preemptor ? ` by ${n.preemptor}` : '';
  return `${serverLabel(n.serverName).replace(/^y/, 'Y')} was stopped at ${timeOfDay(n.time)}${by}. ${n.message}`;
}
