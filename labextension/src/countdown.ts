/**
 * When to save before a preemption: late enough to keep the latest edits, early enough
 * that the save finishes before the server stops. Pure, so jest can check the plan.
 */

/** Seconds before the deadline at which open documents are saved, for a warning of `period` seconds. */
export function saveMargin(period: number): number {
  // A quarter of the warning, at least 3 s (a save takes a moment), at most 15 s.
  return Math.min(15, Math.max(3, period / 4));
}

/**
 * Whether the automatic save is due now: `remaining` seconds left of a warning of
 * `period` seconds, and not yet saved. Due at once when the warning came late.
 */
export function saveDue(remaining: number, period: number, saved: boolean): boolean {
  return !saved && remaining <= saveMargin(period);
}

/** The notification's sentence while counting down. */
export function warningText(server: string, remaining: number, why: string, thisServer: boolean): string {
  const secs = Math.max(0, Math.ceil(remaining));
  const when = secs > 0 ? `in ${secs} s` : 'now';
  const save = thisServer ? ' Open documents are saved for you before then.' : '';
  return `${server[0].toUpperCase()}${server.slice(1)} will be stopped ${when} to make room for other work.${save} ${why}`.trim();
}
