/**
 * The submit form: a command or a Python script, resources, a priority class my team may
 * use. A dry run first: if the job would stop one of my own servers, say which and ask.
 */

import { h } from './dom';
import { TenancyModel } from './model';
import { requestAPI } from './request';
import { ownVictims, submission } from './submission';
import { IDryRun, IWorkload } from './types';

export class SubmitForm {
  readonly node: HTMLFormElement;

  constructor(private model: TenancyModel, private submitted: (w: IWorkload) => void) {
    this.node = h(
      'form',
      { class: 'jp-TenancySubmit', onsubmit: (ev: Event) => this.onSubmit(ev) },
      h(
        'div',
        { class: 'jp-TenancySubmit-mode' },
        h('label', {}, this._modeCommand, ' Command'),
        h('label', {}, this._modeScript, ' Python script')
      ),
      this._text,
      h(
        'div',
        { class: 'jp-TenancySubmit-grid' },
        h('label', {}, 'CPU', this._cpu),
        h('label', {}, 'Memory', this._memory),
        h('label', {}, 'GPU', this._gpu),
        h('label', {}, 'Replicas', this._replicas)
      ),
      h('label', { class: 'jp-TenancySubmit-row' }, 'Priority class', this._priority),
      this._tenantRow,
      h('label', { class: 'jp-TenancySubmit-row' }, 'Name (optional)', this._name),
      h('div', { class: 'jp-TenancySubmit-actions' }, this._submit),
      this._confirm,
      this._message
    );
  }

  /** The choices that depend on my teams (their priority classes). */
  render(): void {
    const s = this.model.snapshot;
    const tenants = (s?.tenants ?? []).filter(t => !(t.errors ?? []).length);
    const tenant = tenants.find(t => t.group === this._tenant.value) ?? s?.tenant ?? tenants[0];
    const classes = tenant?.priorityClasses ?? [];
    const key = `${tenants.map(t => t.group).join(',')}|${classes.join(',')}`;
    if (key === this._choices) {
      return;
    }
    this._choices = key;
    const chosen = this._priority.value;
    this._priority.replaceChildren(...classes.map(c => h('option', { value: c }, c)));
    this._priority.value = classes.includes(chosen)
      ? chosen
      : classes.includes('high-priority-research')
        ? 'high-priority-research'
        : (classes[0] ?? '');
    const team = this._tenant.value || s?.tenant?.group || '';
    this._tenant.replaceChildren(...tenants.map(t => h('option', { value: t.group }, t.group)));
    this._tenant.value = team;
    this._tenantRow.style.display = tenants.length > 1 ? '' : 'none';
    this._submit.disabled = !s?.ok || !tenant;
  }

  private values() {
    return {
      mode: (this._modeScript.checked ? 'script' : 'command') as 'command' | 'script',
      text: this._text.value,
      cpu: this._cpu.value,
      memory: this._memory.value,
      gpu: this._gpu.value,
      replicas: this._replicas.value,
      priorityClass: this._priority.value,
      name: this._name.value,
      tenant: this._tenant.value
    };
  }

  private say(text: string, level: 'info' | 'error' = 'info'): void {
    this._message.textContent = text;
    this._message.dataset.level = level;
  }

  private async onSubmit(ev: Event): Promise<void> {
    ev.preventDefault();
    if (!this._text.value.trim()) {
      this.say(this._modeScript.checked ? 'Write the Python script to run.' : 'Write the command to run.', 'error');
      return;
    }
    const body = JSON.stringify(submission(this.values()));
    this._confirm.replaceChildren();
    this._submit.disabled = true;
    try {
      const dry = await requestAPI<IDryRun>('workloads?dryRun=true', { method: 'POST', body });
      const warning = ownVictims(dry, this.model.snapshot?.user);
      if (warning) {
        this.say('');
        this._confirm.append(
          h('p', { role: 'alert' }, warning),
          h('button', { type: 'button', class: 'jp-mod-styled jp-mod-warn', onclick: () => this.send(body) }, 'Submit anyway'),
          h('button', { type: 'button', class: 'jp-mod-styled', onclick: () => this._confirm.replaceChildren() }, 'Keep my server')
        );
        return;
      }
      await this.send(body);
    } catch (err) {
      this.say((err as Error).message, 'error');
    } finally {
      this._submit.disabled = false;
    }
  }

  private async send(body: string): Promise<void> {
    this._confirm.replaceChildren();
    try {
      const w = await requestAPI<IWorkload>('workloads', { method: 'POST', body });
      this.submitted(w);
      this.say(`Submitted ${w.name}: ${w.state === 'Pending' ? 'queued' : w.state.toLowerCase()}.`);
    } catch (err) {
      this.say((err as Error).message, 'error');
    }
  }

  private _modeCommand = h('input', { type: 'radio', name: 'tenancy-mode', value: 'command', checked: true });
  private _modeScript = h('input', { type: 'radio', name: 'tenancy-mode', value: 'script' });
  private _text = h('textarea', {
    class: 'jp-TenancySubmit-text',
    rows: '3',
    placeholder: 'python train.py --epochs 10',
    'aria-label': 'Command or script'
  });
  private _cpu = h('input', { class: 'jp-TenancySubmit-cpu', value: '1', size: '4', 'aria-label': 'CPU' });
  private _memory = h('input', { class: 'jp-TenancySubmit-memory', placeholder: '1Gi', size: '5', 'aria-label': 'Memory' });
  private _gpu = h('input', { class: 'jp-TenancySubmit-gpu', value: '0', size: '3', 'aria-label': 'GPU' });
  private _replicas = h('input', { class: 'jp-TenancySubmit-replicas', value: '1', size: '3', 'aria-label': 'Replicas' });
  private _priority = h('select', { class: 'jp-TenancySubmit-priority' });
  private _tenant = h('select', { class: 'jp-TenancySubmit-tenant' });
  private _tenantRow = h('label', { class: 'jp-TenancySubmit-row' }, 'Team', this._tenant);
  private _name = h('input', { class: 'jp-TenancySubmit-name', placeholder: 'my-job' });
  private _submit = h('button', { type: 'submit', class: 'jp-mod-styled jp-mod-accept' }, 'Submit');
  private _confirm = h('div', { class: 'jp-TenancySubmit-confirm' });
  private _message = h('p', { class: 'jp-TenancySubmit-message', role: 'status' });
  private _choices = '';
}
