"""Distributed view: ranks of a run side by side, their collectives matched, the straggler named."""
