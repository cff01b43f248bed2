"""Analyses of a read trace, one package per view; the shared steps (op links, shape filling) beside them."""
