"""Performance of a distributed (FlowVR) pipeline from its mapping onto a PC cluster.

The model of Jubertie, Melin: "Performance Prediction for Mappings of Distributed Applications
on PC Clusters". Describe modules (T_exec, LD), FIFO and greedy connections, nodes with CPUs and
networks (:mod:`studies.pipeline_mapping.model.description`); :func:`solve` predicts every
module's concurrent execution time, CPU share and iteration time, finds cycles and buffer
overflows; :func:`link_loads` and :func:`path_latency` give network load and path latency.
"""

from studies.pipeline_mapping.model.description import (
    Connection,
    Edge,
    Instance,
    Mapping,
    MappingError,
    Module,
    Network,
    Node,
    Placement,
)
from studies.pipeline_mapping.model.network import LinkLoad, link_loads, path_latency
from studies.pipeline_mapping.model.solve import (
    ModulePrediction,
    Overflow,
    Solution,
    UnorderableCycle,
    solve,
)

__all__ = [
    "Connection",
    "Edge",
    "Instance",
    "LinkLoad",
    "Mapping",
    "MappingError",
    "Module",
    "ModulePrediction",
    "Network",
    "Node",
    "Overflow",
    "Placement",
    "Solution",
    "UnorderableCycle",
    "link_loads",
    "path_latency",
    "solve",
]
