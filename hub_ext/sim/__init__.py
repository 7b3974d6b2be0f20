"""The scenario simulator behind ``tenancy simulate``: the engine driven on a simulated clock."""
