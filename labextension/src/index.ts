/**
 * jupyterhub-tenancy in JupyterLab: the team's quota in the status bar, my work and its
 * queue in a sidebar panel, and a warning with an autosave before preemption. Everything
 * comes from this server's `tenancy/api/` (hub_ext/labserver), fed by one event stream.
 * Its settings (schema/plugin.json) are followed live; its model is provided to other
 * extensions as `ITenancyQuota` (tokens.ts).
 */

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { PageConfig, URLExt } from '@jupyterlab/coreutils';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';
import { Signal } from '@lumino/signaling';

import { connectionLostPlugin } from './connectionlost';
import { quotaIcon } from './icon';
import { logsWidget } from './logs';
import { TenancyModel } from './model';
import { TenancyPanel } from './panel';
import { eventsUrl, requestAPI } from './request';
import { TenancySettings } from './settings';
import { QuotaStatus } from './status';
import { ITenancyQuota } from './tokens';
import { INotice, ISnapshot } from './types';
import { PreemptionWarnings } from './warning';

export { ITenancyQuota } from './tokens';

const PLUGIN = 'jupyterhub-tenancy:plugin';
const OPEN = 'tenancy:open-panel';

const plugin: JupyterFrontEndPlugin<ITenancyQuota> = {
  id: PLUGIN,
  description: "The team's quota, my jobs and their queue, and warnings before preemption.",
  autoStart: true,
  provides: ITenancyQuota,
  optional: [IStatusBar, ICommandPalette, ISettingRegistry, ITranslator],
  activate: (
    app: JupyterFrontEnd,
    statusBar: IStatusBar | null,
    palette: ICommandPalette | null,
    registry: ISettingRegistry | null,
    translator: ITranslator | null
  ): ITenancyQuota => {
    const trans = (translator ?? nullTranslator).load('jupyterhub-tenancy');
    const settings = new TenancySettings();
    if (registry) {
      registry
        .load(PLUGIN)
        .then(s => settings.follow(s))
        .catch(reason => console.error(`jupyterhub-tenancy: its settings could not be read: ${reason}`));
    }
    const model = new TenancyModel(trans);
    // The hub's home page: its servers, to start one again once this one stopped.
    const hubPrefix = PageConfig.getOption('hubPrefix');
    const hubHome = hubPrefix ? PageConfig.getOption('hubHost') + URLExt.join(hubPrefix, 'home') : null;

    const saveAll = async () => {
      await app.commands.execute('docmanager:save-all');
    };
    const dismissNotice = async (n: INotice) => {
      await requestAPI(
        'notices/dismiss',
        { method: 'POST', body: JSON.stringify({ workload: n.workload }) },
        false,
        trans
      );
      const s = model.snapshot;
      if (s) {
        model.set({ ...s, notices: (s.notices ?? []).filter(x => x.workload !== n.workload) } as ISnapshot);
      }
    };
    const warnings = new PreemptionWarnings(model, settings, saveAll, dismissNotice, trans, hubHome);

    const panel = new TenancyPanel(
      model,
      {
        openLogs: w => {
          const id = `jp-tenancy-logs-${w.id}`;
          const open = Array.from(app.shell.widgets('main')).find(x => x.id === id);
          if (open) {
            app.shell.activateById(id);
            return;
          }
          app.shell.add(logsWidget(model, w, trans), 'main');
        },
        saveAll: () => warnings.saveNow(model.snapshot?.server?.workloadId ?? undefined),
        dismissNotice,
        openFolder: path => {
          // The file browser's own command: shows the folder (and the browser, if it was hidden).
          void app.commands.execute('filebrowser:go-to-path', { path: `/${path}` });
        },
        hubHome
      },
      trans
    );
    panel.title.icon = quotaIcon;
    app.shell.add(panel, 'right', { rank: 600 });

    app.commands.addCommand(OPEN, {
      label: trans.__('Show Team Quota and My Jobs'),
      execute: () => app.shell.activateById(panel.id)
    });
    palette?.addItem({ command: OPEN, category: trans.__('Tenancy') });

    if (statusBar) {
      const item = new QuotaStatus(model, () => void app.commands.execute(OPEN), trans);
      // Shown unless the setting hides it or this is no tenancy hub; asked again on either's change.
      const activeStateChanged = new Signal<QuotaStatus, void>(item);
      settings.changed.connect(() => activeStateChanged.emit());
      model.changed.connect(() => activeStateChanged.emit());
      statusBar.registerStatusItem('jupyterhub-tenancy:status', {
        item,
        align: 'left',
        rank: 100,
        isActive: () => settings.showStatusItem && model.snapshot?.available !== false,
        activeStateChanged
      });
    }

    model.changed.connect((_, s) => {
      if (s && s.available === false) {
        // Not in a tenancy hub: nothing to show; stop listening.
        model.disconnect();
        if (panel.isAttached) {
          panel.close();
        }
      }
    });
    model.connect(new EventSource(eventsUrl(), { withCredentials: true }));
    // An eviction's deadline passes with no event: the clock moves this server's end.
    window.setInterval(() => model.tick(), 1000);
    return model;
  }
};

export default [plugin, connectionLostPlugin];
