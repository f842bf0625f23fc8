"""The doors: each a contract spoken over HTTP onto the one engine, one package each, exporting
a `Door` (door.py) registered in the `uhp_server.doors` entry-point group (registry.py)."""
