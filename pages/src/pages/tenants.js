// The tenants page is rendered by the service (a table that changes when groups do); nothing to draw.
export function tenants() {}
