"""Performance prediction for mappings of a distributed application's modules onto a PC cluster
(Jubertie, Melin: "Performance Prediction for Mappings of Distributed Applications on PC
Clusters"): the model and its search (``model``), the mapping file format (``mapping_file``) and
an MPI pipeline that runs a mapping to measure it (``pipeline``).
"""
