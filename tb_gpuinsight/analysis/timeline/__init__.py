"""Timeline view: a level-of-detail index of one span, and the ranks of a run stacked on one time base."""
