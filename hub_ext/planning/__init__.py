"""Capacity planning (issue 25): what happened over a period (timeline), what it measures (measure), the
same arrivals under another tree (whatif), the service's history as a scenario (history)."""
