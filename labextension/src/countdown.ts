/**
 * When to save before a preemption: late enough to keep the latest edits, early enough
 * that the save finishes before the server stops. Pure, so jest can check the plan.
 */

import { duration, english, ITrans } from './vocabulary';

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

/**
 * The notification's sentence while counting down: `server` starts the sentence (`This
 * server`, `Your server "gpu"`); `saving` when open documents here are saved before the stop.
 */
export function warningText(server: string, remaining: number, why: string, saving: boolean, trans: ITrans = english): string {
  const left = Math.ceil(remaining);
  const stops =
    left > 0
      ? trans.__('%1 will be stopped in %2 to make room for other work.', server, duration(left, trans))
      : trans.__('%1 will be stopped now to make room for other work.', server);
  const save = saving ? trans.__('Open documents are saved for you before then.') : '';
  return [stops, save, why].filter(Boolean).join(' ');
}
