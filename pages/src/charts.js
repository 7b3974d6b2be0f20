// Chart.js, registered with only what the pages draw (esbuild leaves the rest out).
import {
  BarController, BarElement, CategoryScale, Chart, Filler, Legend, LinearScale, LineController, LineElement,
  PointElement, Tooltip
} from 'chart.js';

import { colour, timeOfDay } from './format';

Chart.register(BarController, BarElement, CategoryScale, Filler, Legend, LinearScale, LineController, LineElement,
  PointElement, Tooltip);
Chart.defaults.animation = false;
Chart.defaults.maintainAspectRatio = false;
Chart.defaults.font.family = 'system-ui, -apple-system, "Segoe UI", sans-serif';

export { Chart };

// The service's clock now (samples carry its times, not the browser's): the page's first data says
// what time it was there when the page was made; the browser's clock measures what passed since.
let skew = null;
export function serviceNow() {
  if (skew === null) {
    let then = null;
    try {
      then = JSON.parse(document.getElementById('page-data').textContent).now;
    } catch (err) {
      then = null;
    }
    skew = typeof then === 'number' ? then - Date.now() / 1000 : 0;
  }
  return Date.now() / 1000 + skew;
}

// Time axes end now, not at a rounder tick minutes ahead: the axis is bounded by the data, and each
// line is drawn on to now at its last value (a sample is pushed whenever the figures change, so
// none since means the same figures).
const endNow = {
  id: 'endNow',
  beforeUpdate(chart) {
    const now = Math.max(serviceNow(), ...chart.data.datasets.map(d => {
      const real = (d.data || []).filter(p => !p.toNow);
      return real.length ? real[real.length - 1].x : -Infinity;
    }));
    for (const d of chart.data.datasets) {
      const data = d.data || [];
      if (data.length && data[data.length - 1].toNow) data.pop();
      const last = data[data.length - 1];
      if (last && last.x < now) data.push({ x: now, y: last.y, toNow: true });
    }
    chart.options.scales.x.max = now;
  },
  afterUpdate(chart) {
    chart.canvas.dataset.axisEnd = String(chart.scales.x.max); // where the axis ends, for people's tools and tests
  }
};

// A chart over time: datasets of {label, data: [{x: epoch seconds, y}], ...}.
export function timeChart(canvas, datasets, { stacked = false, yTitle = '' } = {}) {
  return new Chart(canvas, {
    type: 'line',
    data: { datasets },
    plugins: [endNow],
    options: {
      parsing: false,
      normalized: true,
      interaction: { mode: 'nearest', axis: 'x', intersect: false },
      elements: { point: { radius: 0, hitRadius: 6 }, line: { borderWidth: 2, tension: 0 } },
      scales: {
        x: { type: 'linear', bounds: 'data', ticks: { maxTicksLimit: 6, callback: v => timeOfDay(v) } },
        y: { beginAtZero: true, stacked, title: { display: !!yTitle, text: yTitle } }
      },
      plugins: {
        legend: { position: 'bottom', labels: { boxWidth: 12 } },
        tooltip: { callbacks: { title: items => (items.length ? timeOfDay(items[0].parsed.x) : '') } }
      }
    }
  });
}

export function line(label, data, color, extra = {}) {
  return { label, data, borderColor: color, backgroundColor: color, fill: false, ...extra };
}

export function area(label, data, i = 0, extra = {}) {
  const c = colour(label, i);
  return { label, data, borderColor: c, backgroundColor: c + '99', fill: 'stack', stack: 'teams', ...extra };
}

export function barChart(canvas, labels, datasets, { horizontal = false, stacked = false, xTitle = '', yTitle = '', max } = {}) {
  return new Chart(canvas, {
    type: 'bar',
    data: { labels, datasets },
    options: {
      indexAxis: horizontal ? 'y' : 'x',
      scales: {
        x: { stacked, beginAtZero: true, max: horizontal ? max : undefined, title: { display: !!xTitle, text: xTitle } },
        y: { stacked, beginAtZero: true, title: { display: !!yTitle, text: yTitle } }
      },
      plugins: { legend: { position: 'bottom', labels: { boxWidth: 12 }, display: datasets.length > 1 } }
    }
  });
}
