"""GPU kernel-time prediction, analytical against machine learning (Amarís, de Camargo, Dyab,
Goldman, Trystram: "A Comparison of GPU Execution Time Prediction using Machine Learning and
Analytical Modeling"), reproduced on this project's OpenCL kernels: a BSP-style model and learned
comparators.
"""
