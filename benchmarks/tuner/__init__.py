"""The tuner core alone: the cost of choosing, replaying recorded frames, and the learned
predictor embedded in render loops this project did not write.
"""
