/**
 * The Lab extension's own lines (the status bar, a workload's reason, position and times,
 * notices, this server's end), put together from the shared vocabulary (vocabulary.ts).
 * Pure, tested by jest.
 */

import { FINAL, INotice, IResourceBar, IServerEnd, ISnapshot, IWorkload } from './types';
import {
  amount,
  countdown,
  duration,
  english,
  ITrans,
  quantityValue,
  resourceName,
  sentence,
  startedAt,
  timeOfDay
} from './vocabulary';

/** Resources worth a place in the status bar: those in use, else the first the quota names. */
export function resourcesThatMatter(bars: IResourceBar[], most = 2): IResourceBar[] {
  const used = bars.filter(b => b.used > 0);
  return (used.length ? used : bars.slice(0, 1)).slice(0, most);
}

/**
 * Whether a workload waits in the queue. A notebook being evicted is not waiting for room:
 * its server is on its way out (the service reads its Terminating pod as Pending).
 */
export function isQueued(w: IWorkload): boolean {
  return (
    w.state === 'Pending' &&
    typeof w.evictionDeadline !== 'number' &&
    !(w.pods ?? []).some(p => p.phase === 'Terminating' || p.phase === 'Evicted')
  );
}

/** My workloads waiting in the queue; `except` (this server's own, once it ended) is not. */
export function queuedCount(workloads: IWorkload[] | undefined, except: string | null = null): number {
  return (workloads ?? []).filter(w => w.id !== except && isQueued(w)).length;
}

/**
 * What the scheduler booked for my queued work that is not running: a job waiting for the
 * pods it evicted to go ("waiting-for-eviction") has its room booked in the quota's `used`.
 * In `resource`'s base units.
 */
export function bookedForQueued(workloads: IWorkload[] | undefined, resource: string): number {
  let total = 0;
  for (const w of workloads ?? []) {
    if (!isQueued(w) || w.reason !== 'waiting-for-eviction') {
      continue;
    }
    const each = quantityValue(w.resources?.requests?.[resource]) ?? 0;
    total += each * (w.replicas ?? 1);
  }
  return total;
}

/** A bar as in use: my queued work's booked room taken out of `used` (a queued job is not used). */
export function inUse(bar: IResourceBar, workloads: IWorkload[] | undefined): IResourceBar {
  const booked = bookedForQueued(workloads, bar.resource);
  if (!booked) {
    return bar;
  }
  const used = Math.max(0, bar.used - booked);
  return { ...bar, used, borrowed: Math.max(0, used - bar.min) };
}

/**
 * A bar at a glance: used within the guarantee, of the guarantee, then what is borrowed:
 * `CPU 10 of 10 + 10 borrowed`, `CPU 4 of 10`, `memory 8 GiB of 10 GiB`.
 */
export function glanceText(bar: IResourceBar, trans: ITrans = english): string {
  const a = (v: number) => amount(bar.resource, v, trans);
  const name = resourceName(bar.resource, trans);
  const borrowed = Math.max(0, bar.used - bar.min);
  if (bar.min <= 0) {
    return borrowed > 0 ? trans.__('%1 %2 borrowed', name, a(borrowed)) : trans.__('%1 none guaranteed', name);
  }
  const within = trans.__('%1 %2 of %3', name, a(Math.min(bar.used, bar.min)), a(bar.min));
  return borrowed > 0 ? trans.__('%1 + %2 borrowed', within, a(borrowed)) : within;
}

/** The same in a full sentence, with the ceiling: the status bar's tooltip and the panel's bars. */
export function barSentence(bar: IResourceBar, trans: ITrans = english): string {
  const a = (v: number) => amount(bar.resource, v, trans);
  const name = resourceName(bar.resource, trans);
  const borrowed = Math.max(0, bar.used - bar.min);
  const parts = [trans.__('%1: %2 in use of a guarantee of %3', name, a(Math.min(bar.used, bar.min)), a(bar.min))];
  if (borrowed > 0) {
    parts.push(trans.__('%1 borrowed', a(borrowed)));
  }
  if (bar.max !== null) {
    parts.push(trans.__('at most %1', a(bar.max)));
  }
  return `${parts.join(', ')}.`;
}

export type Level = 'ok' | 'borrowing' | 'full' | 'down' | 'evicting' | 'stopped';

/** The status bar's text and colour for a snapshot (`now` in epoch seconds, for countdowns). */
export function statusLine(
  s: ISnapshot | null,
  now: number,
  trans: ITrans = english,
  end: IServerEnd | null = null,
  gone = false
): { text: string; level: Level; title: string } {
  if (gone && !end && !(s && evictions(s, now).length)) {
    return {
      text: trans.__('Server not running'),
      level: 'stopped',
      title: trans.__(
        'This server does not answer: it was stopped (from the hub home, the Jobs page, or because it was idle) or it is restarting. Your files are kept: start it again from the hub home.'
      )
    };
  }
  if (end) {
    return {
      text: end.phase === 'stopped' ? trans.__('Server stopped') : trans.__('Server stopping…'),
      level: end.phase === 'stopped' ? 'stopped' : 'evicting',
      title: endText(end, s, trans)
    };
  }
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
      title: plainMessage(evicting.workload.evictionMessage ?? '', s, trans)
    };
  }
  const leaf = s.path?.[0];
  const team = s.tenant?.group ?? trans.__('no team');
  const all = (leaf?.resources ?? []).map(b => inUse(b, s.workloads));
  const bars = resourcesThatMatter(all);
  const queued = queuedCount(s.workloads);
  let text = [team, ...bars.map(b => glanceText(b, trans))].join('  ');
  if (queued) {
    text += ` · ${trans.__('%1 queued', queued)}`;
  }
  const level: Level = leaf?.resources.some(b => b.atMax)
    ? 'full'
    : all.some(b => b.used > b.min)
      ? 'borrowing'
      : 'ok';
  const state =
    level === 'full'
      ? trans.__('%1 is at its ceiling: new work waits until something ends. Click for details.', team)
      : level === 'borrowing'
        ? trans.__(
            '%1 uses more than its guarantee: the extra is borrowed and may be taken back. Click for details.',
            team
          )
        : trans.__('%1 is within its guarantee. Click for details.', team);
  const title = [...all.map(b => barSentence(b, trans)), state].join('\n');
  return { text, level, title };
}

/**
 * This server's end from what the page knows: `prev` (what it said before), the latest
 * snapshot, the time, and when the page last lost its server (`lostAt`: its event stream or
 * JupyterLab's own requests failed; null while it answers). Lost after the eviction's deadline
 * is the stop; lost before it is a blip. A stopped server stays stopped for this page; a
 * stopping one whose eviction was withdrawn (no deadline, running again) is not ending.
 */
export function serverEnd(
  prev: IServerEnd | null,
  s: ISnapshot | null,
  now: number,
  lostAt: number | null
): IServerEnd | null {
  if (prev?.phase === 'stopped') {
    return prev;
  }
  const here = s?.server?.workloadId ?? null;
  const w = here ? (s?.workloads ?? []).find(x => x.id === here) : undefined;
  const why = w?.evictionMessage ?? prev?.why ?? '';
  if (w && FINAL.includes(w.state)) {
    return { phase: 'stopped', at: w.finished ?? now, why };
  }
  const deadline = typeof w?.evictionDeadline === 'number' ? w.evictionDeadline : null;
  const due = deadline !== null && deadline <= now;
  if (due || (prev?.phase === 'stopping' && !s?.ok)) {
    const since = deadline ?? prev?.at ?? now;
    return lostAt !== null && lostAt >= since
      ? { phase: 'stopped', at: lostAt, why }
      : { phase: 'stopping', at: since, why };
  }
  return null;
}

/** What the page says of this server's end, in sentences. */
export function endText(end: IServerEnd, s: ISnapshot | null, trans: ITrans = english): string {
  const why = plainMessage(stripWho(end.why), s, trans);
  const who = whoFrom(end.why, s, trans);
  const first =
    end.phase === 'stopping'
      ? who
        ? trans.__('This server is being stopped now to make room for %1.', who)
        : trans.__('This server is being stopped now to make room for other work.')
      : who
        ? trans.__('This server was stopped at %1 to make room for %2.', timeOfDay(end.at), who)
        : trans.__('This server was stopped at %1 to make room for other work.', timeOfDay(end.at));
  const then =
    end.phase === 'stopped'
      ? trans.__('Your files are kept: start a server again from the hub home when you need one.')
      : '';
  return [first, sentence(why), then].filter(Boolean).join(' ');
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

/** `Large` for the profile `large`. */
function profileName(profile: string): string {
  return profile ? profile[0].toUpperCase() + profile.slice(1) : profile;
}

/**
 * A workload as people name it: `Your notebook "gpu" (Large)`, `This notebook` (this
 * server's), a job by the name it was given.
 */
export function workTitle(w: IWorkload, here: string | null | undefined, trans: ITrans = english): string {
  if (w.kind !== 'notebook') {
    return w.name;
  }
  const base =
    w.id === here
      ? trans.__('This notebook')
      : w.serverName
        ? trans.__('Your notebook "%1"', w.serverName)
        : trans.__('Your notebook');
  return w.profile ? `${base} (${profileName(w.profile)})` : base;
}

/** A pod reference as the scheduler writes it: `team-c/carol-job-0`, `team-b/nb-bob-gpu-0`. */
const POD_REF = /\b([a-z][-a-z0-9]*)\/([a-z0-9][-a-z0-9]*?)-(\d+)\b/g;

/**
 * `team-c/nb-carol-0` as people say it: `carol's notebook`; one of mine by my name for it
 * (`your job "x"`, `your notebook`); another team's job as `the job "x" of team-c`.
 */
export function whoIs(namespace: string, name: string, s: ISnapshot | null, trans: ITrans = english): string {
  const mine = (s?.workloads ?? []).find(w => w.name === name && w.namespace === namespace);
  if (mine) {
    return mine.kind === 'notebook'
      ? mine.serverName
        ? trans.__('your notebook "%1"', mine.serverName)
        : trans.__('your notebook')
      : trans.__('your job "%1"', mine.name);
  }
  const notebook = /^nb-(.+)$/.exec(name);
  if (notebook) {
    return notebook[1] === s?.user ? trans.__('your notebook') : trans.__("%1's notebook", notebook[1]);
  }
  return trans.__('the job "%1" of %2', name, namespace);
}

/** A message of the scheduler's with its pod references in people's words. */
export function plainMessage(text: string, s: ISnapshot | null, trans: ITrans = english): string {
  return String(text ?? '').replace(POD_REF, (_, ns: string, name: string) => whoIs(ns, name, s, trans));
}

/** Who an eviction message names as taking the room, in people's words ('' if none). */
function whoFrom(message: string, s: ISnapshot | null, trans: ITrans): string {
  const m = /^(?:Reclaimed|Preempted) by ([a-z][-a-z0-9]*)\/([a-z0-9][-a-z0-9]*?)-(\d+)\b/.exec(message ?? '');
  return m ? whoIs(m[1], m[2], s, trans) : '';
}

/** An eviction message without its `Reclaimed by x:` head (said already in the sentence before it). */
function stripWho(message: string): string {
  return String(message ?? '').replace(/^(?:Reclaimed|Preempted) by [^:]*:\s*/, '');
}

/**
 * `Your server was stopped at 14:03:27 to make room for carol's notebook: its quota ...`:
 * the time of the stop itself (the notebook's end, when this page has it; the decision's
 * time otherwise), who took the room and why, in people's words.
 */
export function noticeText(n: INotice, trans: ITrans = english, s: ISnapshot | null = null): string {
  const server = serverLabel(n.serverName, trans, true);
  const ended = (s?.workloads ?? []).find(w => w.id === n.workload)?.finished;
  const at = timeOfDay(ended ?? n.time);
  const ref = n.preemptor ? /^([^/]+)\/(.+?)-(\d+)$/.exec(n.preemptor) : null;
  const who = ref ? whoIs(ref[1], ref[2], s, trans) : whoFrom(n.message, s, trans);
  const stopped = who
    ? trans.__('%1 was stopped at %2 to make room for %3.', server, at, who)
    : trans.__('%1 was stopped at %2.', server, at);
  const why = sentence(plainMessage(stripWho(n.message), s, trans));
  return why ? `${stopped} ${why}` : stopped;
}

/**
 * An error's message fit to show: a program's words (an exception's repr, a traceback) are
 * replaced by a plain sentence with the HTTP status.
 */
export function plainError(message: string, status: number, trans: ITrans = english): string {
  const text = String(message ?? '').trim();
  if (!text || /\b[A-Z]\w*(?:Exception|Error)\(|Traceback \(most recent call last\)|^\d{3} \w+\(/.test(text)) {
    return trans.__('The request was refused (HTTP %1). Try again in a moment; if it keeps failing, ask an admin.', status);
  }
  return text;
}

/** The log view's line above the output. */
export function logStatus(name: string, state: string, word: string, hasOutput: boolean, trans: ITrans = english): string {
  if (FINAL.includes(state)) {
    return hasOutput
      ? trans.__('%1 is %2. This is the end of its output.', name, word)
      : trans.__('%1 is %2. The job ended without writing any output.', name, word);
  }
  return hasOutput
    ? trans.__('%1 is %2; following its output…', name, word)
    : trans.__('%1 is %2; it has not written any output yet.', name, word);
}
