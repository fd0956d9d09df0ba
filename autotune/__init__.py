"""In-application auto-tuning runtime: predict a frame's cost, choose knobs, learn from the measurement."""
