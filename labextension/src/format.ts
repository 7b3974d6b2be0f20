/**
 * The Lab extension's own lines (the status bar, a workload's reason, position and times,
 * notices), put together from the shared vocabulary (vocabulary.ts). Pure, tested by jest.
 */

import { FINAL, INotice, IResourceBar, ISnapshot, IWorkload } from './types';
import { barText, countdown, duration, english, ITrans, resourceName, sentence, startedAt, timeOfDay } from './vocabulary';

/** Resources worth a place in the status bar: those in use, else the first the quota names. */
export function resourcesThatMatter(bars: IResourceBar[], most = 2): IResourceBar[] {
  const used = bars.filter(b => b.used > 0);
  return (used.length ? used : bars.slice(0, 1)).slice(0, most);
}

export function queuedCount(workloads: IWorkload[] | undefined): number {
  return (workloads ?? []).filter(w => w.state === 'Pending').length;
}

export type Level = 'ok' | 'borrowing' | 'full' | 'down' | 'evicting';

/** The status bar's text and colour for a snapshot (`now` in epoch seconds, for countdowns). */
export function statusLine(
  s: ISnapshot | null,
  now: number,
  trans: ITrans = english
): { text: string; level: Level; title: string } {
  if (!s) {
    return {
      text: trans.__('Team quota: connecting…'),
      level: 'ok',
      title: trans.__('Connecting to the tenancy scheduler.')
    };
  }
  if (!s.ok) {
    return { text: trans.__('Team quota unavailable'), level: 'down', title: s.message ?? '' };
  }
  const evicting = evictions(s, now)[0];
  if (evicting) {
    return {
      text: trans.__('Server stops in %1', countdown(evicting.remaining)),
      level: 'evicting',
      title: evicting.workload.evictionMessage ?? ''
    };
  }
  const leaf = s.path?.[0];
  const team = s.tenant?.group ?? trans.__('no team');
  const bars = leaf ? resourcesThatMatter(leaf.resources) : [];
  const parts = [team, ...bars.map(b => barText(b, trans))];
  const queued = queuedCount(s.workloads);
  let text = parts.join('  ');
  if (queued) {
    text += ` · ${trans.__('%1 queued', queued)}`;
  }
  const level: Level = leaf?.resources.some(b => b.atMax)
    ? 'full'
    : leaf?.resources.some(b => b.borrowed > 0)
      ? 'borrowing'
      : 'ok';
  const title =
    level === 'full'
      ? trans.__('%1 is at its ceiling: new work waits until something ends. Click for details.', team)
      : level === 'borrowing'
        ? trans.__(
            '%1 uses more than its guarantee: the extra is borrowed and may be taken back. Click for details.',
            team
          )
        : trans.__('%1 is within its guarantee. Click for details.', team);
  return { text, level, title };
}

/** Running for, or ran for (finished), or waited for so far (pending). */
export function elapsed(w: IWorkload, now: number, trans: ITrans = english): string {
  const start = startedAt(w);
  if (start === null) {
    return w.state === 'Pending' ? trans.__('waiting %1', duration(now - w.created, trans)) : '';
  }
  if (FINAL.includes(w.state)) {
    return trans.__('ran %1', duration((w.finished ?? now) - start, trans));
  }
  return trans.__('running %1', duration(now - start, trans));
}

/** The scheduler's reason in plain words, as a sentence. */
export function plainReason(w: IWorkload, trans: ITrans = english): string {
  const d = w.details ?? {};
  const msg = w.message ?? '';
  switch (w.reason) {
    case 'quota-max':
      if (d.node && d.resource && d.limit && !msg.includes('never start')) {
        return trans.__(
          'Waiting for room in quota %1: it is full for %2 (%3 of %4 in use; this needs %5).',
          d.node,
          resourceName(d.resource as string, trans),
          d.used,
          d.limit,
          d.need
        );
      }
      return sentence(msg);
    case 'quota-min':
      return sentence(trans.__('Waiting: %1', msg));
    case 'cluster-capacity':
      return sentence(trans.__('Waiting for the cluster to have room: %1', msg));
    case 'waiting-for-eviction':
      return trans.__(
        'Starting soon: room is being made for it (%1 pod(s) are stopping).',
        (d.victims ?? []).length || trans.__('some')
      );
    case 'resource-quota':
    case 'limit-range':
      return sentence(trans.__("Refused by your namespace's limits: %1", msg));
    case 'preempted':
    case 'reclaimed':
      return sentence(trans.__('Stopped to make room. %1', msg));
    default:
      if (w.state === 'Pending' && !msg) {
        return trans.__('Queued: the scheduler looks at it in a moment.');
      }
      return sentence(msg);
  }
}

/** `position 2 in the queue, 1 in your team` */
export function positionText(w: IWorkload, trans: ITrans = english): string {
  if (w.state !== 'Pending' || !w.position) {
    return '';
  }
  return trans.__('position %1 in the queue, %2 in your team', w.position, w.leafPosition ?? '?');
}

/** My notebooks being evicted, soonest first, with the seconds left. */
export function evictions(s: ISnapshot | null, now: number): { workload: IWorkload; remaining: number }[] {
  return (s?.workloads ?? [])
    .filter(w => typeof w.evictionDeadline === 'number' && !FINAL.includes(w.state))
    .map(w => ({ workload: w, remaining: (w.evictionDeadline as number) - now }))
    .filter(e => e.remaining > -30)
    .sort((a, b) => a.remaining - b.remaining);
}

/** `your server "gpu"` or `your server` (`Your ...` at the start of a sentence). */
export function serverLabel(serverName: string | null | undefined, trans: ITrans = english, start = false): string {
  if (serverName) {
    return start ? trans.__('Your server "%1"', serverName) : trans.__('your server "%1"', serverName);
  }
  return start ? trans.__('Your server') : trans.__('your server');
}

/** `Your server was stopped at 14:03:27 by team-c/carol-train-0. Reclaimed by ...` */
export function noticeText(n: INotice, trans: ITrans = english): string {
  const server = serverLabel(n.serverName, trans, true);
  const at = timeOfDay(n.time);
  const stopped = n.preemptor
    ? trans.__('%1 was stopped at %2 by %3.', server, at, n.preemptor)
    : trans.__('%1 was stopped at %2.', server, at);
  return `${stopped} ${n.message}`;
}
