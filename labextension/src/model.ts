/**
 * The one model every view renders: a snapshot from the server extension's event stream
 * (`state` events), with single workloads (`workload` events) merged in as they come, so
 * an eviction's deadline shows at once. Views never fetch on a timer of their own.
 */

import { ISignal, Signal } from '@lumino/signaling';

import { ITenancyQuota } from './tokens';
import { IQuotaNode, ISnapshot, ITenant, IWorkload } from './types';
import { english, ITrans } from './vocabulary';

/** `list` with `w` in place of the workload of the same id (or added first, as the newest). */
export function mergeWorkload(list: IWorkload[], w: IWorkload): IWorkload[] {
  const i = list.findIndex(x => x.id === w.id);
  if (i < 0) {
    return [w, ...list];
  }
  const out = list.slice();
  out[i] = w;
  return out;
}

/** A snapshot with one workload event applied; other users' workloads (teammates') are not mine. */
export function applyWorkload(s: ISnapshot, w: IWorkload): ISnapshot {
  if (!s.ok || (s.user && w.user !== s.user)) {
    return s;
  }
  return { ...s, workloads: mergeWorkload(s.workloads ?? [], w) };
}

/** A stream that reconnects by itself (EventSource does), feeding the model. */
export interface IEventSourceLike {
  addEventListener(type: string, listener: (ev: MessageEvent) => void): void;
  close(): void;
  onerror: ((ev: Event) => any) | null;
}

export class TenancyModel implements ITenancyQuota {
  constructor(private trans: ITrans = english) {}

  private _snapshot: ISnapshot | null = null;
  private _changed = new Signal<this, ISnapshot | null>(this);
  private _source: IEventSourceLike | null = null;

  get snapshot(): ISnapshot | null {
    return this._snapshot;
  }

  get changed(): ISignal<this, ISnapshot | null> {
    return this._changed;
  }

  get tenant(): ITenant | null {
    return this._snapshot?.tenant ?? null;
  }

  get path(): IQuotaNode[] {
    return this._snapshot?.path ?? [];
  }

  set(snapshot: ISnapshot): void {
    this._snapshot = snapshot;
    this._changed.emit(snapshot);
  }

  /** A workload changed (its own event, or the answer to my own submit or cancel). */
  update(w: IWorkload): void {
    if (this._snapshot) {
      this.set(applyWorkload(this._snapshot, w));
    }
  }

  connect(source: IEventSourceLike): void {
    this.disconnect();
    this._source = source;
    source.addEventListener('state', ev => this.set(JSON.parse(ev.data)));
    source.addEventListener('workload', ev => this.update(JSON.parse(ev.data)));
    source.addEventListener('status', ev => {
      const status = JSON.parse(ev.data);
      this.set({ ...(this._snapshot ?? { available: true }), ok: status.ok, message: status.message });
    });
    source.onerror = () => {
      // The server itself is gone (stopped, restarting): say so; EventSource tries again.
      if (this._snapshot?.available !== false) {
        this.set({
          ...(this._snapshot ?? { available: true }),
          ok: false,
          message: this.trans.__('This notebook server does not answer right now; the quota comes back when it does.')
        });
      }
    };
  }

  disconnect(): void {
    this._source?.close();
    this._source = null;
  }
}
