"""Shapes view: ops grouped by input shapes and dtypes; tensor traces joined to those ops."""
