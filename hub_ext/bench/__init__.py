"""``tenancy bench``: the scheduler core's speed at growing scale (figures, never a test gate)."""
