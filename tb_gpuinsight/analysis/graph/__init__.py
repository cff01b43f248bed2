"""Execution graph view: an Execution Trace's ops and data dependencies linked to Kineto timings; critical paths."""
