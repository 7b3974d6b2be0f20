// A tiny element builder: text always goes in as text (textContent), never as HTML.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (typeof value === 'function') el.addEventListener(key.replace(/^on/, ''), value);
    else if (key === 'class') el.className = value;
    else if (key === 'value') el.value = value;
    else if (value === true) el.setAttribute(key, '');
    else el.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export function fill(parent, ...children) {
  parent.replaceChildren(...children.flat().filter(c => c !== null && c !== undefined && c !== false));
  return parent;
}

export function rows(table, trs) {
  fill(table.tBodies[0], trs);
}

export const $ = (sel, root = document) => root.querySelector(sel);
