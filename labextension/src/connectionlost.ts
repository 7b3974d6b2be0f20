/**
 * JupyterLab's "the server cannot be reached" hook (`IConnectionLost`), provided again: once
 * this server's eviction countdown has ended, its stop is expected and the panel and the
 * countdown's notification say so with the way to the hub home, so JupyterLab's "Server
 * unavailable or unreachable… Restart?" dialog does not race them. Otherwise it does what
 * JupyterLab's own does: the hub's restart question in a hub, the plain notice elsewhere.
 */

import {
  ConnectionLost,
  IConnectionLost,
  JupyterFrontEnd,
  JupyterFrontEndPlugin,
  JupyterLab
} from '@jupyterlab/application';
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';

import { ITenancyQuota } from './tokens';

/** The hub extension's restart command (@jupyterlab/hub-extension). */
const HUB_RESTART = 'hub:restart';

export const connectionLostPlugin: JupyterFrontEndPlugin<IConnectionLost> = {
  id: 'jupyterhub-tenancy:connectionlost',
  description: "Says this server stopped when its eviction's countdown ended, instead of JupyterLab's restart question.",
  autoStart: true,
  provides: IConnectionLost,
  requires: [JupyterFrontEnd.IPaths, ITenancyQuota],
  optional: [ITranslator, JupyterLab.IInfo],
  activate: (
    app: JupyterFrontEnd,
    paths: JupyterFrontEnd.IPaths,
    quota: ITenancyQuota,
    translator: ITranslator | null,
    info: JupyterLab.IInfo | null
  ): IConnectionLost => {
    const trans = (translator ?? nullTranslator).load('jupyterlab');
    let asking = false;
    // JupyterLab's own, as @jupyterlab/hub-extension:connectionlost has it.
    const stock: IConnectionLost = async (manager, err) => {
      if (!paths.urls.hubPrefix) {
        return ConnectionLost(manager, err, translator ?? undefined);
      }
      if (asking) {
        return;
      }
      asking = true;
      if (info) {
        info.isConnected = false;
      }
      const result = await showDialog({
        title: trans.__('Server unavailable or unreachable'),
        body: trans.__('Your server at %1 is not running.\nWould you like to restart it?', paths.urls.base),
        buttons: [Dialog.okButton({ label: trans.__('Restart') }), Dialog.cancelButton({ label: trans.__('Dismiss') })]
      });
      if (info) {
        info.isConnected = true;
      }
      asking = false;
      if (result.button.accept) {
        await app.commands.execute(HUB_RESTART);
      }
    };
    return async (manager, err, t) => {
      quota.lost();
      if (quota.end) {
        // Expected: the panel, the status bar and the notification say it stopped.
        document.body.dataset.tenancyConnectionLost = 'stopped';
        return;
      }
      return stock(manager, err, t);
    };
  }
};
