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

// A chart over time: datasets of {label, data: [{x: epoch seconds, y}], ...}.
export function timeChart(canvas, datasets, { stacked = false, yTitle = '' } = {}) {
  return new Chart(canvas, {
    type: 'line',
    data: { datasets },
    options: {
      parsing: false,
      normalized: true,
      interaction: { mode: 'nearest', axis: 'x', intersect: false },
      elements: { point: { radius: 0, hitRadius: 6 }, line: { borderWidth: 2, tension: 0 } },
      scales: {
        x: { type: 'linear', ticks: { maxTicksLimit: 6, callback: v => timeOfDay(v) } },
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
