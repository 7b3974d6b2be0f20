import { LabIcon } from '@jupyterlab/ui-components';

/** Three bars of a quota, the middle one past its mark. */
const svgstr = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <rect x="3" y="12" width="4" height="9" rx="1"/>
    <rect x="10" y="4" width="4" height="17" rx="1"/>
    <rect x="17" y="9" width="4" height="12" rx="1"/>
    <rect x="1" y="8" width="22" height="1.6"/>
  </g>
</svg>`;

export const quotaIcon = new LabIcon({ name: 'jupyterhub-tenancy:quota', svgstr });
