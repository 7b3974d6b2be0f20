/**
 * The one model every view renders: a snapshot from the server extension's event stream
 * (`state` events), with single workloads (`workload` events) merged in as they come, so
 * an eviction's deadline shows at once. Views never fetch on a timer of their own.
 */

import { ISignal, Signal } from '@lumino/signaling';

import { serverEnd } from './format';
import { ITenancyQuota } from './tokens';
import { IQuotaNode, IServerEnd, ISnapshot, ITenant, IWorkload } from './types';
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
  constructor(
    private trans: ITrans = english,
    now?: () => number
  ) {
    if (now) {
      this._now = now;
    }
  }

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

  /** This server's end once its eviction's deadline passed (null while it is not ending). */
  get end(): IServerEnd | null {
    return this._end;
  }

  set(snapshot: ISnapshot): void {
    this._snapshot = snapshot;
    this._end = serverEnd(this._end, snapshot, this._now(), this._lostAt);
    this._changed.emit(snapshot);
  }

  /**
   * The clock moved (`now` in epoch seconds): an eviction's deadline may have passed with no
   * event. True when this server's end changed (then `changed` was emitted too).
   */
  tick(now: number = this._now()): boolean {
    const end = serverEnd(this._end, this._snapshot, now, this._lostAt);
    if (end?.phase === this._end?.phase) {
      return false;
    }
    this._end = end;
    this._changed.emit(this._snapshot);
    return true;
  }

  /**
   * This server stopped answering (its event stream dropped, or JupyterLab's own requests
   * failed). After its eviction's deadline that is its stop; before, a blip.
   */
  lost(): void {
    this._lostAt = this._now();
    if (!this.tick() && !this._end && !this._gone) {
      // Not the end of an eviction: stopped some other way (the hub home, the Jobs page, the idle
      // culler) or restarting; the status bar says so instead of a quota it cannot read.
      this._gone = true;
      this._changed.emit(this._snapshot);
    }
  }

  /** JupyterLab found this server not running, and no eviction ended it (cleared when it answers again). */
  get gone(): boolean {
    return this._gone && !this._end;
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
    source.addEventListener('state', ev => {
      this._lostAt = null; // it answers again
      this._gone = false;
      this.set(JSON.parse(ev.data));
    });
    source.addEventListener('workload', ev => this.update(JSON.parse(ev.data)));
    source.addEventListener('status', ev => {
      const status = JSON.parse(ev.data);
      this.set({ ...(this._snapshot ?? { available: true }), ok: status.ok, message: status.message });
    });
    source.onerror = () => {
      // The server itself is gone (stopped, restarting): say so; EventSource tries again.
      this._lostAt = this._now();
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

  private _end: IServerEnd | null = null;
  private _lostAt: number | null = null;
  private _gone = false;
  private _now: () => number = () => Date.now() / 1000;
}
