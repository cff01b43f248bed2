"""Memory view: the allocator's events of a span, per device: curves, peaks, live allocations by op."""
