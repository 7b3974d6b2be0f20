import { Live, setXsrf } from './live';
import { cluster } from './pages/cluster';
import { datasets } from './pages/datasets';
import { job } from './pages/job';
import { jobs } from './pages/jobs';
import { nodes } from './pages/nodes';
import { quota } from './pages/quota';
import { tenants } from './pages/tenants';
import { tree } from './pages/tree';

const PAGES = { cluster, nodes, jobs, job, quota, datasets, tree, tenants };

function start() {
  const el = document.getElementById('page-data');
  if (!el) return;
  const data = JSON.parse(el.textContent);
  setXsrf(data.xsrf);
  const live = new Live(data);
  let name = document.body.dataset.page;
  if (name === 'jobs' && data.workload) name = 'job';
  const page = PAGES[name];
  if (page) page(data, live);
  live.connect();
  window.tenancyPageReady = true;
}

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
else start();
