/**
 * Before a preemption: a notification with a countdown for the whole warning period and
 * a "Save all now" button, and an automatic save of every open document before the
 * deadline. After a stop: a notification saying which server was stopped, when, by whom
 * and why, until the user dismisses it.
 */

import { Notification } from '@jupyterlab/apputils';

import { saveDue, warningText } from './countdown';
import { evictions, noticeText, serverLabel } from './format';
import { TenancyModel } from './model';
import { INotice } from './types';

interface IShown {
  id: string;
  period: number;
  saved: boolean;
}

export class PreemptionWarnings {
  constructor(
    private model: TenancyModel,
    private saveAll: () => Promise<void>,
    private dismiss: (n: INotice) => Promise<void>
  ) {
    model.changed.connect(() => this.update());
    this._timer = window.setInterval(() => this.update(), 1000);
  }

  dispose(): void {
    window.clearInterval(this._timer);
  }

  /** Save now (the button), and remember it so the automatic save is not done twice. */
  async saveNow(workloadId?: string): Promise<void> {
    await this.saveAll();
    const shown = workloadId ? this._shown.get(workloadId) : undefined;
    if (shown) {
      shown.saved = true;
    }
  }

  private update(): void {
    const s = this.model.snapshot;
    const now = Date.now() / 1000;
    const here = s?.server?.workloadId ?? null;
    const live = new Set<string>();
    for (const { workload: w, remaining } of evictions(s, now)) {
      live.add(w.id);
      const thisServer = w.id === here;
      const label = thisServer ? 'this server' : serverLabel(w.serverName);
      let shown = this._shown.get(w.id);
      const message = warningText(label, remaining, w.evictionMessage ?? '', thisServer);
      const actions = thisServer
        ? [{ label: 'Save all now', caption: 'Save every open document now', callback: () => void this.saveNow(w.id) }]
        : [];
      if (!shown) {
        shown = {
          id: Notification.warning(message, { autoClose: false, actions }),
          period: Math.max(remaining, 1),
          saved: false
        };
        this._shown.set(w.id, shown);
      } else {
        Notification.update({ id: shown.id, message, type: 'warning', autoClose: false, actions });
      }
      if (thisServer && saveDue(remaining, shown.period, shown.saved)) {
        shown.saved = true;
        void this.saveAll();
      }
    }
    for (const [id, shown] of this._shown) {
      if (!live.has(id)) {
        Notification.dismiss(shown.id);
        this._shown.delete(id);
      }
    }
    this.showNotices();
  }

  /** Stopped servers I have not dismissed: one notification each, once per session. */
  private showNotices(): void {
    for (const n of this.model.snapshot?.notices ?? []) {
      if (this._noticed.has(n.workload)) {
        continue;
      }
      const id = Notification.info(noticeText(n), {
        autoClose: false,
        actions: [
          {
            label: 'Dismiss',
            caption: 'Do not mention this stop again',
            callback: () => void this.dismiss(n)
          }
        ]
      });
      this._noticed.set(n.workload, id);
    }
    const current = new Set((this.model.snapshot?.notices ?? []).map(n => n.workload));
    for (const [workload, id] of this._noticed) {
      if (!current.has(workload) && this.model.snapshot?.ok) {
        Notification.dismiss(id);
        this._noticed.delete(workload);
      }
    }
  }

  private _shown = new Map<string, IShown>();
  private _noticed = new Map<string, string>();
  private _timer: number;
}
