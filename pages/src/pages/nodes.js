import { barChart, line, timeChart } from '../charts';
import { fill, h } from '../dom';
import { amount, colour, resourceName } from '../format';
import { appendSample } from '../live';
import { chartBox, points } from './common';

// Nodes: each node's allocatable, allocated by team (as a share of allocatable), pods; CPU per node over time.
export function nodes(data, live) {
  const history = (data.history || []).slice();
  let snap = data.snapshot;
  appendSample(history, snap);
  const charts = {};
  let historyChart = null;

  function nodeDatasets(node, res) {
    const teams = Object.keys(node.teams || {}).sort((a, b) => (a === 'other teams') - (b === 'other teams') || a.localeCompare(b));
    const pct = (r, v) => (node.allocatable[r] ? (100 * v) / node.allocatable[r] : 0);
    const sets = teams.map((t, i) => ({
      label: t, backgroundColor: colour(t, i),
      data: res.map(r => pct(r, (node.teams[t] || {})[r] || 0)),
      amounts: res.map(r => amount(r, (node.teams[t] || {})[r] || 0))
    }));
    sets.push({
      label: 'free', backgroundColor: '#eaeef2',
      data: res.map(r => pct(r, Math.max(0, (node.allocatable[r] || 0) - (node.allocated[r] || 0)))),
      amounts: res.map(r => amount(r, Math.max(0, (node.allocatable[r] || 0) - (node.allocated[r] || 0))))
    });
    return sets;
  }

  function render() {
    const box = document.getElementById('nodes');
    for (const [name, node] of Object.entries(snap.nodes || {})) {
      const res = Object.keys(node.allocatable).filter(r => r !== 'pods');
      const labels = res.map(r => `${resourceName(r)} (${amount(r, node.allocated[r] || 0)} of ${amount(r, node.allocatable[r])})`);
      const caption = `${name}: ${node.pods} pod${node.pods === 1 ? '' : 's'}`;
      if (!charts[name]) {
        const { box: fig, canvas } = chartBox(caption, `node-${name}`);
        fig.dataset.node = name;
        box.append(fig);
        charts[name] = barChart(canvas, labels, nodeDatasets(node, res), { horizontal: true, stacked: true, max: 100,
          xTitle: '% of allocatable' });
        charts[name].options.plugins.tooltip = { callbacks: { label: c => `${c.dataset.label}: ${c.dataset.amounts[c.dataIndex]}` } };
        charts[name].update();
      } else {
        fig(name).querySelector('figcaption').textContent = caption;
        charts[name].data.labels = labels;
        charts[name].data.datasets = nodeDatasets(node, res);
        charts[name].update();
      }
    }
    const names = Object.keys(snap.nodes || {});
    const sets = names.map((n, i) => line(n, points(history, s => ((s.nodes[n] || {}).allocated || {}).cpu || 0, 'cpu'), colour(n, i)));
    if (!historyChart) {
      const { box: fig, canvas } = chartBox('Allocated CPU per node', 'node-history-chart');
      document.getElementById('node-history').append(fig);
      historyChart = timeChart(canvas, sets, { yTitle: 'cores' });
    } else {
      historyChart.data.datasets = sets;
      historyChart.update();
    }
  }

  function fig(name) {
    return document.querySelector(`figure[data-node="${CSS.escape(name)}"]`);
  }

  render();
  live.on('sample', sample => {
    snap = sample;
    appendSample(history, sample);
    render();
  });
}
