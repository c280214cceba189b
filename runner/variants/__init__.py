"""Attention variants. Each module registers its variants with @runner.registry.variant; add a file to add one."""
