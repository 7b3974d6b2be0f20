"""``tenancy replay``: a scenario run on a real cluster by the service's own controller and Kubernetes
backend, in this process (``run.py``), with what it makes there under names of its own (``cluster.py``)
and the service's parts as a replay adapts them (``service.py``). ``sim/`` is the engine alone on a
simulated clock; this is the same scenario against the real thing.
"""
