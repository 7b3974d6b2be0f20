/**
 * The extension's settings, as JupyterLab's settings editor shows them (schema/plugin.json):
 * read through the setting registry and followed live; views read the current values here
 * and re-render on `changed`.
 */

import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { ISignal, Signal } from '@lumino/signaling';

export class TenancySettings {
  /** The team's quota in the status bar. */
  showStatusItem = true;
  /** Open documents saved automatically before this server is preempted. */
  saveBeforePreemption = true;
  /** Notifications: the countdown before a preemption, the notice after a stop. */
  notifications = true;

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Follow `settings` from now on (their current values first). */
  follow(settings: ISettingRegistry.ISettings): void {
    this.read(settings);
    settings.changed.connect(() => this.read(settings));
  }

  private read(settings: ISettingRegistry.ISettings): void {
    this.showStatusItem = settings.get('showStatusItem').composite !== false;
    this.saveBeforePreemption = settings.get('saveBeforePreemption').composite !== false;
    this.notifications = settings.get('notifications').composite !== false;
    this._changed.emit();
  }

  private _changed = new Signal<this, void>(this);
}
