/**
 * jupyterhub-tenancy in JupyterLab: the team's quota in the status bar, my work and its
 * queue in a sidebar panel, and a warning with an autosave before preemption. Everything
 * comes from this server's `tenancy/api/` (hub_ext/labserver), fed by one event stream.
 */

import { ILabShell, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { IStatusBar } from '@jupyterlab/statusbar';

import { quotaIcon } from './icon';
import { logsWidget } from './logs';
import { TenancyModel } from './model';
import { TenancyPanel } from './panel';
import { eventsUrl, requestAPI } from './request';
import { QuotaStatus } from './status';
import { INotice, ISnapshot } from './types';
import { PreemptionWarnings } from './warning';

const OPEN = 'tenancy:open-panel';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyterhub-tenancy:plugin',
  description: "The team's quota, my jobs and their queue, and warnings before preemption.",
  autoStart: true,
  optional: [IStatusBar, ILabShell, ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    statusBar: IStatusBar | null,
    labShell: ILabShell | null,
    palette: ICommandPalette | null
  ) => {
    const model = new TenancyModel();

    const saveAll = async () => {
      await app.commands.execute('docmanager:save-all');
    };
    const dismissNotice = async (n: INotice) => {
      await requestAPI('notices/dismiss', { method: 'POST', body: JSON.stringify({ workload: n.workload }) });
      const s = model.snapshot;
      if (s) {
        model.set({ ...s, notices: (s.notices ?? []).filter(x => x.workload !== n.workload) } as ISnapshot);
      }
    };
    const warnings = new PreemptionWarnings(model, saveAll, dismissNotice);

    const panel = new TenancyPanel(model, {
      openLogs: w => {
        const id = `jp-tenancy-logs-${w.id}`;
        const open = Array.from(app.shell.widgets('main')).find(x => x.id === id);
        if (open) {
          app.shell.activateById(id);
          return;
        }
        app.shell.add(logsWidget(model, w), 'main');
      },
      saveAll: () => warnings.saveNow(model.snapshot?.server?.workloadId ?? undefined),
      dismissNotice
    });
    panel.title.icon = quotaIcon;
    app.shell.add(panel, 'right', { rank: 600 });

    app.commands.addCommand(OPEN, {
      label: 'Show Team Quota and My Jobs',
      execute: () => app.shell.activateById(panel.id)
    });
    palette?.addItem({ command: OPEN, category: 'Tenancy' });

    if (statusBar) {
      const item = new QuotaStatus(model, () => void app.commands.execute(OPEN));
      statusBar.registerStatusItem('jupyterhub-tenancy:status', {
        item,
        align: 'left',
        rank: 100,
        isActive: () => model.snapshot?.available !== false
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
    void labShell;
    model.connect(new EventSource(eventsUrl(), { withCredentials: true }));
  }
};

export default plugin;
