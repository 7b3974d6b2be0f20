"""The demo's scheduler service: the second seed's tree, four teams, a 56-CPU virtual node.

The teams themselves are hub groups, defined in ``jupyterhub_config.py`` (``load_groups``).
"""

import importlib.util
import os

from hub_ext.backends.local.account_python import python_for_accounts

here = os.path.dirname(os.path.abspath(__file__))
state = os.environ.get("TENANCY_DEMO_STATE", os.path.join(here, "..", ".demo"))

c = get_config()  # noqa: F821 - provided by traitlets

c.TenancyService.db_url = f"sqlite:///{state}/tenancy.sqlite"
c.TenancyService.tree_file = os.path.join(here, "quota-tree.yaml")
# Training jobs run in STATE/workloads/<id>: as root, as their user's own account
# (jupyter-<name>), with a Python that account can run; else as you.
c.LocalBackend.data_dir = state
c.LocalBackend.python = python_for_accounts()
# Not root: every user's jobs would run as you. Fine for a demo on your own machine, so say
# yes here (the service still logs it at start-up); never for real users (README, "Security").
c.LocalBackend.allow_shared_account = True
c.LocalBackend.nodes_config = [
    {"name": "local-1", "allocatable": {"cpu": "56", "memory": "128Gi", "nvidia.com/gpu": "4"}},
]
# A preempted notebook's user gets the default minute to save (JupyterLab counts down and saves
# open documents); the tests shorten it through this variable.
if os.environ.get("TENANCY_NOTEBOOK_WARNING_SECONDS"):
    c.LocalBackend.notebook_warning_seconds = float(os.environ["TENANCY_NOTEBOOK_WARNING_SECONDS"])
# The pages' history: a sample every 15 s (the tests take one a second), kept for two days.
if os.environ.get("TENANCY_HISTORY_SECONDS"):
    c.TenancyService.history_interval_seconds = float(os.environ["TENANCY_HISTORY_SECONDS"])
# Namespace hard caps, as the API server would enforce them: team-d may request at most
# 15 CPUs in all (pending work counts too), whatever its quota leaf would lend it.
c.TenancyService.objects = [
    {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "dev-quota", "namespace": "team-d"},
     "spec": {"hard": {"requests.cpu": "15", "pods": "6"}}},
]
# The second seed's dataset: fashion-mnist for team-a and team-b, here a folder with a small
# sample made on first start (no download; demo/fashion_sample.py). Their notebooks and jobs
# find it at datasets/fashion-mnist in their working folder and in TENANCY_DATASETS; as root,
# only team-a's and team-b's accounts may enter it (the others get "Permission denied").
_spec = importlib.util.spec_from_file_location("fashion_sample", os.path.join(here, "fashion_sample.py"))
_sample = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_sample)
datasets = os.path.join(state, "datasets")
os.makedirs(datasets, exist_ok=True)
os.chmod(datasets, 0o711)  # accounts cross it to the folders they may enter; nobody lists it
_sample.make_sample(os.path.join(datasets, "fashion-mnist"))
c.TenancyService.datasets = [
    {"apiVersion": "tenancy.jupyter.org/v1alpha1", "kind": "Dataset", "metadata": {"name": "fashion-mnist"},
     "spec": {"description": "Fashion-MNIST sample: 300 images of 28x28, ten classes (made by the demo)",
              "teams": ["team-a", "team-b"], "source": {"path": os.path.join(datasets, "fashion-mnist")},
              "readOnly": True, "mountPath": "/datasets/fashion-mnist"}},
]
