/**
 * The status-bar item: my team, usage of its guarantee, then borrowed, queued; this server's
 * countdown and its end. The status bar shows or hides it (index.ts: the setting, and whether
 * this is a tenancy hub).
 */

import { TranslationBundle } from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';

import { statusLine } from './format';
import { TenancyModel } from './model';

export class QuotaStatus extends Widget {
  constructor(
    private model: TenancyModel,
    private open: () => void,
    private trans: TranslationBundle
  ) {
    super();
    this.addClass('jp-TenancyStatus');
    this.node.setAttribute('role', 'button');
    this.node.addEventListener('click', () => this.open());
    model.changed.connect(() => this.render());
    // A countdown must tick between events: the clock, not the data, changes.
    this._timer = window.setInterval(() => this.render(), 1000);
    this.render();
  }

  render(): void {
    const s = this.model.snapshot;
    if (s && !s.available) {
      return;
    }
    const line = statusLine(s, Date.now() / 1000, this.trans, this.model.end, this.model.gone);
    this.node.textContent = line.text;
    this.node.title = line.title;
    this.node.dataset.level = line.level;
  }

  dispose(): void {
    window.clearInterval(this._timer);
    super.dispose();
  }

  private _timer: number;
}
