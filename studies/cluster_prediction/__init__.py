"""Predicting a distributed volume renderer's frame time on another cluster from per-step
performance histograms and a small neural net (Tkachev, Frey, Müller, Bruder, Ertl: "Prediction
of Distributed Volume Visualization Performance to Support Render Hardware Acquisition").
"""
