"""Pure model of the Kubernetes objects multi-tenancy rests on: parsing and validation, no I/O."""

from .dataset import Dataset, check_datasets, parse_dataset
from .errors import ValidationError
from .limitrange import LimitRange, apply_limit_ranges, parse_limit_range
from .manifests import flatten, load_yaml, parse_object, read_file
from .namespace import Namespace, parse_namespace
from .pods import PodSpec, parse_pod_spec
from .priorityclass import SEED_CLASSES, PriorityClass, PriorityClasses, parse_priority_class
from .quantity import ResourceList, describe, format_list, format_milli, parse_quantity, parse_resource_list
from .resourcequota import ResourceQuota, parse_resource_quota
from .tree import ElasticQuotaTree, QuotaNode, parse_tree
from .workloads import WorkloadSpec, parse_workload

__all__ = [
    "Dataset", "ElasticQuotaTree", "LimitRange", "Namespace", "PodSpec", "PriorityClass", "PriorityClasses",
    "QuotaNode", "ResourceList", "ResourceQuota", "SEED_CLASSES", "ValidationError", "WorkloadSpec",
    "apply_limit_ranges", "check_datasets", "describe", "flatten", "format_list", "format_milli", "load_yaml",
    "parse_dataset", "parse_limit_range", "parse_namespace", "parse_object", "parse_pod_spec", "parse_priority_class",
    "parse_quantity", "parse_resource_list", "parse_resource_quota", "parse_tree", "parse_workload",
    "read_file",
]
