"""attnbench: attention benchmarks under JAX, timed on the device, kernel named, checked for correctness."""

__version__ = "0.1.0"
