/**
 * The words and numbers people read, for every screen: the service's pages (pages/, whose
 * esbuild bundle imports this file) and the Lab extension. Pure functions, tested by jest
 * against tests/vocabulary.json, the table the Python vocabulary is tested against too.
 *
 * Words go through `trans.__` (JupyterLab's translator in the Lab extension); the default,
 * `english`, fills `%1`, `%2`, ... as JupyterLab's null translator does.
 */

/** The part of JupyterLab's TranslationBundle the vocabulary uses. */
export interface ITrans {
  __(msgid: string, ...args: any[]): string;
}

/** No translation: `%1`, `%2`, ... are replaced by the arguments. */
export const english: ITrans = {
  __: (msgid: string, ...args: any[]) => msgid.replace(/%(\d+)/g, (m, n) => (n - 1 < args.length ? String(args[n - 1]) : m))
};

/** A quota bar's numbers (base units): what `barText` reads. */
export interface IBarNumbers {
  resource: string;
  used: number;
  min: number;
  max: number | null;
  borrowed: number;
}

/** `CPU`, `memory`, `GPU`, `pods`; other resources by their own name. */
export function resourceName(resource: string, trans: ITrans = english): string {
  switch (resource) {
    case 'cpu':
      return trans.__('CPU');
    case 'memory':
      return trans.__('memory');
    case 'nvidia.com/gpu':
      return trans.__('GPU');
    case 'pods':
      return trans.__('pods');
    default:
      return resource;
  }
}

/** Whether a resource counts bytes (memory, storage): read in GiB or MiB. */
export function isBytes(resource: string): boolean {
  return resource === 'memory' || resource.endsWith('storage') || resource.endsWith('.memory');
}

/** An amount in base units as people read it: cores, GPUs and pods as numbers, bytes in GiB or MiB. */
export function amount(resource: string, value: number | null | undefined, trans: ITrans = english): string {
  if (value === null || value === undefined) {
    return '—';
  }
  if (isBytes(resource)) {
    const gi = value / 1024 ** 3;
    return gi >= 1 || value === 0 ? trans.__('%1 GiB', trim(gi)) : trans.__('%1 MiB', trim(value / 1024 ** 2));
  }
  return trim(value);
}

const SUFFIXES: Record<string, number> = {
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
  n: 1e-9, u: 1e-6, m: 1e-3, '': 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18
};
const QUANTITY = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$/;

/** A Kubernetes quantity's value in base units (`500m` is 0.5, `1Gi` 1073741824); null for junk. */
export function quantityValue(text: string | number | null | undefined): number | null {
  const match = QUANTITY.exec(String(text ?? '').trim());
  if (!match) {
    return null;
  }
  return match[2] ? Number(match[1] + match[2]) : Number(match[1]) * SUFFIXES[match[3] ?? ''];
}

/** A Kubernetes quantity as the service wrote it (`4Gi`, `500m`), as people read it; junk as is. */
export function quantity(resource: string, text: string, trans: ITrans = english): string {
  const value = quantityValue(text);
  return value === null ? String(text) : amount(resource, value, trans);
}

/** At most two decimals, none when whole: `2.5`, `0.33`, `5`. */
export function trim(value: number): string {
  return String(Math.round(value * 100) / 100);
}

/** `45 s`, `1 min 5 s`, `1 h`, `2 h 5 min`: seconds only under the hour. */
export function duration(seconds: number, trans: ITrans = english): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) {
    return trans.__('%1 s', s);
  }
  if (s < 3600) {
    return s % 60 ? trans.__('%1 min %2 s', Math.floor(s / 60), s % 60) : trans.__('%1 min', s / 60);
  }
  const min = Math.floor((s % 3600) / 60);
  return min ? trans.__('%1 h %2 min', Math.floor(s / 3600), min) : trans.__('%1 h', Math.floor(s / 3600));
}

/** Seconds left as `1:05`, `0:09`, `12:00`: rounded up, never below `0:00`. */
export function countdown(seconds: number): string {
  const s = Math.max(0, Math.ceil(seconds));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}

const two = (n: number) => String(n).padStart(2, '0');

/** The local time of day of epoch seconds: `14:03:27`. */
export function timeOfDay(epoch: number): string {
  const d = new Date(epoch * 1000);
  return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}

/** When something happened: its time of day if on `now`'s day, else with the date; `—` if never. */
export function when(epoch: number | null | undefined, now: number = Date.now() / 1000): string {
  if (!epoch) {
    return '—';
  }
  const d = new Date(epoch * 1000);
  if (d.toDateString() === new Date(now * 1000).toDateString()) {
    return timeOfDay(epoch);
  }
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${timeOfDay(epoch)}`;
}

/** A workload's state (and the scheduler's reason) in one or two words. */
export function stateWord(state: string, reason?: string | null, trans: ITrans = english): string {
  switch (state) {
    case 'Pending':
      return reason === 'inadmissible'
        ? trans.__('cannot start')
        : reason === 'dataset-not-ready'
          ? trans.__('waiting for its data')
          : trans.__('queued');
    case 'Running':
      return trans.__('running');
    case 'Succeeded':
      return trans.__('done');
    case 'Failed':
      return trans.__('failed');
    case 'Cancelled':
      return trans.__('cancelled');
    case 'Stopped':
      return trans.__('stopped');
    case 'Preempted':
      return trans.__('stopped to make room');
    case 'Rejected':
      return trans.__('refused');
    case 'Quarantined':
      return trans.__('set aside');
    default:
      return String(state).toLowerCase();
  }
}

/** A dataset's state in a namespace (Bound, Pending, Refused) in a word or three. */
export function datasetState(state: string, trans: ITrans = english): string {
  switch (state) {
    case 'Bound':
      return trans.__('ready');
    case 'Pending':
      return trans.__('not ready yet');
    case 'Refused':
      return trans.__('refused');
    default:
      return String(state).toLowerCase();
  }
}

/** Text as a sentence: trimmed, capitalised, ending with a stop unless it ends with `.!?)`. */
export function sentence(text: string | null | undefined): string {
  const t = String(text ?? '').trim();
  if (!t) {
    return '';
  }
  const first = t[0].toUpperCase() + t.slice(1);
  return /[.!?)]$/.test(first) ? first : `${first}.`;
}

/** `CPU 12/10 (+2 borrowed) of 20`: used against the guarantee, what is borrowed, the ceiling. */
export function barText(bar: IBarNumbers, trans: ITrans = english): string {
  const r = bar.resource;
  const a = (v: number) => amount(r, v, trans);
  let text = `${resourceName(r, trans)} ${a(bar.used)}/${a(bar.min)}`;
  if (bar.borrowed > 0) {
    text += ` ${trans.__('(+%1 borrowed)', a(bar.borrowed))}`;
  }
  if (bar.max !== null) {
    text += ` ${trans.__('of %1', a(bar.max))}`;
  }
  return text;
}

/** When a workload started running (its first pod's start), if it did. */
export function startedAt(w: { pods?: { startedAt?: number | null }[] }): number | null {
  const starts = (w.pods ?? []).map(p => p.startedAt).filter((t): t is number => typeof t === 'number');
  return starts.length ? Math.min(...starts) : null;
}
