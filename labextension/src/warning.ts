/**
 * Before a preemption: a notification with a countdown for the whole warning period and
 * a "Save all now" button, and an automatic save of every open document before the
 * deadline. When this server's own countdown ends, the same notification says it is
 * stopping, then that it stopped, with the way to the hub home (index.ts keeps JupyterLab's
 * "Server unavailable" dialog from racing it). A withdrawn eviction's notification says it was
 * withdrawn (the server runs on) and closes by itself. After a stop: a notification saying which
 * server was stopped, when, by whom and why, until the user dismisses it. The settings turn the notifications and the
 * automatic save off, live.
 */

import { Notification } from '@jupyterlab/apputils';
import { TranslationBundle } from '@jupyterlab/translation';

import { saveDue, warningText } from './countdown';
import { endText, evictions, noticeText, serverLabel } from './format';
import { TenancyModel } from './model';
import { TenancySettings } from './settings';
import { FINAL, INotice } from './types';

interface IWarned {
  /** The notification's id, while one is shown. */
  toast: string | null;
  period: number;
  saved: boolean;
  /** What the notification says now (not shown again when unchanged). */
  message?: string;
}

export class PreemptionWarnings {
  constructor(
    private model: TenancyModel,
    private settings: TenancySettings,
    private saveAll: () => Promise<void>,
    private dismiss: (n: INotice) => Promise<void>,
    private trans: TranslationBundle,
    private hubHome: string | null = null
  ) {
    model.changed.connect(() => this.update());
    settings.changed.connect(() => this.update());
    this._timer = window.setInterval(() => this.update(), 1000);
  }

  dispose(): void {
    window.clearInterval(this._timer);
  }

  /** Save now (the button), and remember it so the automatic save is not done twice. */
  async saveNow(workloadId?: string): Promise<void> {
    await this.saveAll();
    const warned = workloadId ? this._warned.get(workloadId) : undefined;
    if (warned) {
      warned.saved = true;
    }
  }

  private update(): void {
    const s = this.model.snapshot;
    const now = Date.now() / 1000;
    const here = s?.server?.workloadId ?? null;
    const live = new Set<string>();
    const trans = this.trans;
    const end = this.model.end;
    if (end && here) {
      live.add(here);
      this.showEnd(here);
    }
    for (const { workload: w, remaining } of evictions(s, now)) {
      live.add(w.id);
      const thisServer = w.id === here;
      if (thisServer && end) {
        continue;
      }
      let warned = this._warned.get(w.id);
      if (!warned) {
        warned = { toast: null, period: Math.max(remaining, 1), saved: false };
        this._warned.set(w.id, warned);
      }
      const saving = thisServer && this.settings.saveBeforePreemption;
      if (this.settings.notifications) {
        const label = thisServer ? trans.__('This server') : serverLabel(w.serverName, trans, true);
        const message = warningText(label, remaining, w.evictionMessage ?? '', saving, trans);
        const actions = thisServer
          ? [
              {
                label: trans.__('Save all now'),
                caption: trans.__('Save every open document now'),
                callback: () => void this.saveNow(w.id)
              }
            ]
          : [];
        if (warned.toast === null) {
          warned.toast = Notification.warning(message, { autoClose: false, actions });
        } else {
          Notification.update({ id: warned.toast, message, type: 'warning', autoClose: false, actions });
        }
      } else if (warned.toast !== null) {
        Notification.dismiss(warned.toast);
        warned.toast = null;
      }
      if (saving && saveDue(remaining, warned.period, warned.saved)) {
        warned.saved = true;
        void this.saveAll();
      }
    }
    for (const [id, warned] of this._warned) {
      if (!live.has(id)) {
        // Withdrawn (its reason went away): the countdown's notification says so, then goes by itself.
        const w = (s?.workloads ?? []).find(x => x.id === id);
        const withdrawn = w && !FINAL.includes(w.state) ? w.evictionWithdrawn?.message : undefined;
        if (warned.toast !== null && withdrawn && this.settings.notifications) {
          Notification.update({ id: warned.toast, message: withdrawn, type: 'success', autoClose: 15000, actions: [] });
        } else if (warned.toast !== null) {
          Notification.dismiss(warned.toast);
        }
        this._warned.delete(id);
      }
    }
    this.showNotices();
  }

  /** This server's end: the countdown's notification says it is stopping, then that it stopped. */
  private showEnd(here: string): void {
    const end = this.model.end;
    let warned = this._warned.get(here);
    if (!warned) {
      warned = { toast: null, period: 1, saved: true };
      this._warned.set(here, warned);
    }
    if (!end || !this.settings.notifications) {
      return;
    }
    const message = endText(end, this.model.snapshot, this.trans);
    const home = this.hubHome;
    const actions =
      end.phase === 'stopped' && home
        ? [
            {
              label: this.trans.__('Go to the hub home'),
              caption: this.trans.__('Your servers, to start one again'),
              callback: () => window.location.assign(home)
            }
          ]
        : [];
    if (warned.toast === null) {
      warned.toast = Notification.warning(message, { autoClose: false, actions });
    } else if (warned.message !== message) {
      Notification.update({ id: warned.toast, message, type: 'warning', autoClose: false, actions });
    }
    warned.message = message;
  }

  /** Stopped servers I have not dismissed: one notification each, once per session. */
  private showNotices(): void {
    const notices = this.settings.notifications ? (this.model.snapshot?.notices ?? []) : [];
    for (const n of notices) {
      if (this._noticed.has(n.workload)) {
        continue;
      }
      const id = Notification.info(noticeText(n, this.trans, this.model.snapshot), {
        autoClose: false,
        actions: [
          {
            label: this.trans.__('Dismiss'),
            caption: this.trans.__('Do not mention this stop again'),
            callback: () => void this.dismiss(n)
          }
        ]
      });
      this._noticed.set(n.workload, id);
    }
    const current = new Set(notices.map(n => n.workload));
    for (const [workload, id] of this._noticed) {
      if (!current.has(workload) && (this.model.snapshot?.ok || !this.settings.notifications)) {
        Notification.dismiss(id);
        this._noticed.delete(workload);
      }
    }
  }

  private _warned = new Map<string, IWarned>();
  private _noticed = new Map<string, string>();
  private _timer: number;
}
