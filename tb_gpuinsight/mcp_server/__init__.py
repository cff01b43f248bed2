"""The Model Context Protocol server (`tb-gpuinsight mcp LOGDIR`): the plugin's views as tools for a coding
assistant. `desk.py` reaches the logdir through the plugin's service and routes, `tools.py` and `views.py` shape
each tool's answer, `server.py` wires them into the `mcp` SDK (the `mcp` extra: imported only by `server.py`)."""
