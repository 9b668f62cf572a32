"""CuTe DSL kernels for offline acceptance evaluation (optional `gpu` extra)."""
