"""What every benchmark shares: the run record (machine, others' CPU share, goals marked), the
noise floor, CPU load, where results are written, and the repository tools they load.
"""
