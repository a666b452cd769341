"""Benchmark scripts; each prints its figures as ratios against a baseline run alongside."""
