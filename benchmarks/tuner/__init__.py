"""The tuner core alone: the cost of choosing, and replaying recorded frames.
"""
